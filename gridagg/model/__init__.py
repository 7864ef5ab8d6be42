"""The data model every room of gridagg shares, at the bottom of the layers: datasets and
their columns (schema), grids and their IDs (grid), partial aggregates (aggregate), the
errors a caller can act on (errors), and the small records handed between the directory
and the stores (stamps, trips). Nothing here imports another room of gridagg."""
