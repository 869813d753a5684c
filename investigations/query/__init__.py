"""The query layer: what the pages, the API and the reports ask of the store, and nothing else.

`filters` (the one event filter), `pages` (keyset pages), `limits` (timeouts, bounded counts),
`timeline`, `gaps`, `sessions`, `renames`, `tables`, `digest`, `attribution`, `export` and
`binlog` (each listed in docs/architecture.md, "The investigations app").
"""
