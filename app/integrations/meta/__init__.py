"""The Meta Graph API (Marketing API subset): a read-only client and a separate write client.

:mod:`.reader` holds :class:`~.reader.MetaReader`, which can only issue reads (GET, and batch
requests made of GETs); :mod:`.writer` holds :class:`~.writer.MetaWriter`, the only code that changes
a campaign. The ad-rules dispatcher imports the reader alone (an import-linter contract holds it).
Both sit on :class:`~.client.GraphClient`: one pooled ``httpx.AsyncClient`` per process, versioned
paths, the access token in the ``Authorization`` header (never in a URL, so never in a log line),
errors classified transient or permanent (:mod:`.errors`) and usage headers read (:mod:`.usage`).
"""
