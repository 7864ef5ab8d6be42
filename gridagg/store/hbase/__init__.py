"""The HBase store: HBaseStore (store) over the Thrift1 gateway (gateway), a row per grid
(rows), scans answered by the region servers' observer, a call per region server
(regions, scan), and the bulk load's HFiles (bulk)."""
