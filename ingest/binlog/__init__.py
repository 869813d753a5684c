"""Binary logs: read offline, decoded, joined to the statements of the other logs, undone.

Pure Python, no Django (like ingest/parsers). The modules, in the order data flows:
  - reader: framing, checksums, positions (`recognise`, `read_events`, `read_event_at`);
  - payload: MySQL 8 compressed transactions expanded (`expanded`, `read_event` by address);
  - tables: TABLE_MAP events through mysql-replication's decoder (`decode_table_map`; VECTOR too);
  - rows: rows events counted (metadata pass) or decoded to values (`RowsDecoder`: whole, or
    key first);
  - jsonb: MySQL's binary JSON to the text MySQL shows (`json_text`), partial updates' diffs
    applied (`apply_json_diff`);
  - metadata: the pass ingest stores (`scan` -> `BinlogFile`, `Transaction`, `BinlogProblem`);
  - schema: columns from a CREATE TABLE (`parse_create_table`) when the binlog lacks names;
  - images: row images of one table change on demand (`row_images` -> `RowImage`), table maps
    decoded once per distinct map (`table_map`);
  - flashback: SQL undoing statements (`flashback_sql`, `table_info`);
  - join: logged statements <-> row statements (`join`, `row_statements`).
"""
