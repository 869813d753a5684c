"""Which table became which: the (old, new) pairs of RENAME TABLE and ALTER TABLE ... RENAME.

Pure (no Django). The classifier reports the tables a statement touches as a set; a
table's history needs the direction, which only the statement's own order gives.
"""

from __future__ import annotations

import re

# A table name: `db`.`t`, db.t, `t` or t (backquotes doubled inside a quoted name).
# Possessive, and a pair starts where a name starts: searching a long word from each of
# its characters, or trying every shorter reading of a name, was quadratic.
_NAME = r"(?:`(?:[^`]|``)++`|[\w$]++)(?:\s*\.\s*(?:`(?:[^`]|``)++`|[\w$]++))?"
_RENAME_TABLE = re.compile(r"^\s*RENAME\s+TABLES?\s+(?P<pairs>.+)$", re.IGNORECASE | re.DOTALL)
_PAIR = re.compile(rf"(?<![\w$`])(?P<old>{_NAME})\s+TO\s+(?P<new>{_NAME})", re.IGNORECASE)
_ALTER_RENAME = re.compile(
    rf"^\s*ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?P<old>{_NAME})\s++(?:.*?,\s*)?"
    rf"RENAME\s+(?:TO\s+|AS\s+)?(?!COLUMN\b|INDEX\b|KEY\b)(?P<new>{_NAME})",
    re.IGNORECASE | re.DOTALL,
)


def qualify_name(name: str, database: str | None) -> str:
    """`db`.`t`, db.t or t as db.t (backquotes removed), qualified with `database` when bare."""
    parts = [
        p.strip().strip("`").replace("``", "`")
        for p in re.split(r"\s*\.\s*(?=(?:[^`]*`[^`]*`)*[^`]*$)", name)
    ]
    if len(parts) == 1 and database:
        parts.insert(0, database)
    return ".".join(parts)


def rename_pairs(sql: str, database: str | None) -> list[tuple[str, str]]:
    """[(old, new), ...] in the statement's order, qualified with `database`; [] if it renames none."""
    m = _RENAME_TABLE.match(sql)
    if m:
        return [
            (qualify_name(p["old"], database), qualify_name(p["new"], database))
            for p in _PAIR.finditer(m["pairs"])
        ]
    m = _ALTER_RENAME.match(sql)
    if m:
        return [(qualify_name(m["old"], database), qualify_name(m["new"], database))]
    return []
