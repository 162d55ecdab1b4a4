"""Journey analytics over time: per version and node, daily entered / waiting / exited /
converted, conversion windows, goal rate per version and a comparison of two versions, all
recomputed from the runs and steps that record what happened."""
