"""Why a keyword moved: the results page stored with each measurement (:mod:`.snapshot`), the
difference between two measurements (:mod:`.diff`), the domains most often above the tracked one
(:mod:`.discovery`), each keyword's SERP features over time (:mod:`.features`), and the notes on
the position charts, people's and automatic (:mod:`.annotations`, :mod:`.auto_notes`)."""
