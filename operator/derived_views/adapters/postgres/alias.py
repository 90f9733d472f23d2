"""Switching the alias VIEW without losing what others attached to it.

People attach things to the alias, not to an index: GRANTs (table and
column), an owner, options (`security_barrier`, ...), and views, materialized
views or SQL functions that select from it. `CREATE OR REPLACE VIEW` keeps all
of them, but only if the new column list starts with the old one (same names,
types, typmods, collations). The alias selects the old columns first, by name,
so any index that has every old column unchanged qualifies, whatever its
column order; new columns come after them. Otherwise the view is dropped and
created again in the same transaction, its owner, options and grants are put
back and compared with the old ones before commit; that path is refused when
something depends on the alias, since DROP would break it.

A view reads its tables with its owner's privileges: the owner must be able to
read the new index (the job creates it as its own role), so the switch grants
SELECT on it to the owner when needed and possible.

Every check runs before the first change. `plan_switch` is both the
operator's observation (`postgres_sink.switch_blockers`) and the switch's own
guard, so the planner refuses a cutover the switch would refuse.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, LiteralString

import psycopg
from psycopg import sql

from derived_views.core import reasons

AclItem = tuple[str, str, str, bool]
"""(grantor, grantee, privilege, grantable); grantee "PUBLIC" for everyone."""

PRIVILEGES = frozenset({"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES",
                        "TRIGGER"})


class SwitchRefused(Exception):
    """The alias cannot switch to that index without breaking or losing something."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    typmod: int
    collation: int
    type_name: str

    @property
    def signature(self) -> tuple[int, int, int]:
        return self.type_oid, self.typmod, self.collation


@dataclass(frozen=True)
class Relation:
    oid: int
    owner_oid: int
    owner: str


@dataclass(frozen=True)
class AliasFacts:
    """What the existing alias carries that a switch must keep."""

    relation: Relation
    columns: tuple[Column, ...]
    options: tuple[tuple[str, str], ...]
    acl: frozenset[AclItem]
    column_acl: Mapping[str, frozenset[AclItem]]
    dependents: tuple[str, ...]


@dataclass(frozen=True)
class SwitchPlan:
    """How to point the alias at an index (the outcome of the checks)."""

    select: tuple[str, ...]
    """The view's columns: the old ones first (in place), else the index's in its order."""
    facts: AliasFacts | None
    """The alias as it was (None: there is none yet)."""
    in_place: bool
    """CREATE OR REPLACE keeps everything; False: DROP + CREATE, then restore owner and grants."""
    grant_index_to: str | None
    """A role to GRANT SELECT on the index to: the alias owner cannot read it yet."""


# catalog reads --------------------------------------------------------------------------------

def relation(conn: psycopg.Connection[Any], schema: str, name: str,
             kinds: str = "rvmpf") -> Relation | None:
    row = conn.execute(
        "SELECT c.oid, c.relowner, c.relowner::regrole::text FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = %s AND c.relkind = ANY(%s)",
        (schema, name, list(kinds))).fetchone()
    return None if row is None else Relation(int(row[0]), int(row[1]), str(row[2]))


def columns(conn: psycopg.Connection[Any], oid: int) -> tuple[Column, ...]:
    rows = conn.execute(
        "SELECT attname, atttypid, atttypmod, attcollation, format_type(atttypid, atttypmod) "
        "FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped "
        "ORDER BY attnum", (oid,)).fetchall()
    return tuple(Column(str(r[0]), int(r[1]), int(r[2]), int(r[3]), str(r[4])) for r in rows)


def tables_read_by(conn: psycopg.Connection[Any], oid: int) -> list[str]:
    """Relations a view's query selects from (from pg_depend, visible whoever owns the view)."""
    rows = conn.execute(
        "SELECT DISTINCT t.relname FROM pg_rewrite r "
        "JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid "
        "AND d.refclassid = 'pg_class'::regclass AND d.refobjid <> r.ev_class "
        "JOIN pg_class t ON t.oid = d.refobjid "
        "WHERE r.ev_class = %s AND r.rulename = '_RETURN' ORDER BY 1", (oid,)).fetchall()
    return [str(r[0]) for r in rows]


def views_reading(conn: psycopg.Connection[Any], oid: int) -> list[str]:
    """Views and materialized views whose query selects from relation `oid`."""
    rows = conn.execute(
        "SELECT DISTINCT r.ev_class::regclass::text FROM pg_depend d "
        "JOIN pg_rewrite r ON d.classid = 'pg_rewrite'::regclass AND r.oid = d.objid "
        "WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = %s "
        "AND r.ev_class <> %s ORDER BY 1", (oid, oid)).fetchall()
    return [str(r[0]) for r in rows]


def dependents(conn: psycopg.Connection[Any], oid: int) -> tuple[str, ...]:
    """Objects DROP VIEW would refuse to drop: views, materialized views, SQL-body functions,
    and users of the view's row type; each as PostgreSQL describes it."""
    rows = conn.execute(
        "SELECT DISTINCT CASE WHEN r.oid IS NOT NULL "
        "THEN pg_describe_object('pg_class'::regclass, r.ev_class, 0) "
        "ELSE pg_describe_object(d.classid, d.objid, 0) END "
        "FROM pg_depend d LEFT JOIN pg_rewrite r "
        "ON d.classid = 'pg_rewrite'::regclass AND r.oid = d.objid "
        "WHERE d.deptype = 'n' AND (r.oid IS NULL OR r.ev_class <> %(oid)s) AND ("
        "(d.refclassid = 'pg_class'::regclass AND d.refobjid = %(oid)s) OR "
        "(d.refclassid = 'pg_type'::regclass AND d.refobjid = "
        "(SELECT reltype FROM pg_class WHERE oid = %(oid)s))) ORDER BY 1",
        {"oid": oid}).fetchall()
    return tuple(str(r[0]) for r in rows)


def _acl(conn: psycopg.Connection[Any], oid: int) -> frozenset[AclItem]:
    """The view's privileges, the owner's implicit ones included (NULL relacl = defaults)."""
    rows = conn.execute(
        "SELECT CASE WHEN a.grantor = 0 THEN 'PUBLIC' ELSE a.grantor::regrole::text END, "
        "CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END, "
        "a.privilege_type, a.is_grantable FROM pg_class c, "
        "aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a WHERE c.oid = %s",
        (oid,)).fetchall()
    return frozenset((str(r[0]), str(r[1]), str(r[2]), bool(r[3])) for r in rows)


def _column_acl(conn: psycopg.Connection[Any], oid: int) -> dict[str, frozenset[AclItem]]:
    out: dict[str, set[AclItem]] = {}
    rows = conn.execute(
        "SELECT att.attname, "
        "CASE WHEN a.grantor = 0 THEN 'PUBLIC' ELSE a.grantor::regrole::text END, "
        "CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END, "
        "a.privilege_type, a.is_grantable FROM pg_attribute att, aclexplode(att.attacl) a "
        "WHERE att.attrelid = %s AND att.attnum > 0 AND NOT att.attisdropped",
        (oid,)).fetchall()
    for name, *item in rows:
        out.setdefault(str(name), set()).add((str(item[0]), str(item[1]), str(item[2]),
                                              bool(item[3])))
    return {name: frozenset(items) for name, items in out.items()}


def alias_facts(conn: psycopg.Connection[Any], schema: str, alias: str) -> AliasFacts | None:
    """The alias view's columns, options, grants and dependents; None if there is none."""
    rel = relation(conn, schema, alias, kinds="v")
    if rel is None:
        return None
    row = conn.execute("SELECT option_name, option_value FROM pg_class, "
                       "pg_options_to_table(reloptions) WHERE oid = %s", (rel.oid,)).fetchall()
    return AliasFacts(relation=rel, columns=columns(conn, rel.oid),
                      options=tuple((str(k), str(v)) for k, v in row), acl=_acl(conn, rel.oid),
                      column_acl=_column_acl(conn, rel.oid),
                      dependents=dependents(conn, rel.oid))


def _ask(conn: psycopg.Connection[Any], query: LiteralString, *args: Any) -> bool:
    row = conn.execute(query, args).fetchone()
    return bool(row and row[0])


# the judgement --------------------------------------------------------------------------------

def _column_changes(old: Iterable[Column], new: Mapping[str, Column]) -> list[str]:
    changes = []
    for column in old:
        now = new.get(column.name)
        if now is None:
            changes.append(f"drops column {column.name}")
        elif now.signature != column.signature:
            what = (f"{column.type_name} to {now.type_name}" if now.type_name != column.type_name
                    else f"{column.type_name} with another collation")
            changes.append(f"changes column {column.name} from {what}")
    return changes


def _listing(names: Iterable[str], shown: int = 10) -> str:
    names = list(names)
    if len(names) > shown:
        names = [*names[:shown - 1], f"{len(names) - shown + 1} more"]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def plan_switch(conn: psycopg.Connection[Any], schema: str, alias: str,
                index: str) -> SwitchPlan:
    """Check everything a switch to `index` needs, changing nothing.

    Raises SwitchRefused with what to do when the switch would fail or break
    something; RuntimeError when the index does not exist.
    """
    target = relation(conn, schema, index, kinds="rp")
    if target is None:
        raise RuntimeError(f"index {schema}.{index} does not exist; refusing to switch")
    new_columns = columns(conn, target.oid)
    facts = alias_facts(conn, schema, alias)
    me = conn.execute("SELECT current_user::text, rolsuper FROM pg_roles "
                      "WHERE rolname = current_user").fetchone()
    assert me is not None
    role, superuser = str(me[0]), bool(me[1])
    view = f"{schema}.{alias}"
    if not _ask(conn, "SELECT has_schema_privilege(current_user, %s, 'CREATE')", schema):
        raise SwitchRefused(reasons.SCHEMA_PRIVILEGES, (
            f"role {role} (the sink Secret's user) needs CREATE on schema {schema} to define "
            f"view {view}: GRANT CREATE ON SCHEMA {schema} TO {role}"))
    if facts is None:
        return SwitchPlan(select=tuple(c.name for c in new_columns), facts=None,
                          in_place=False, grant_index_to=_index_grant(conn, schema, index, target,
                                                                      None, role, view))
    owner = facts.relation.owner
    if not _ask(conn, "SELECT pg_has_role(current_user, %s::oid, 'USAGE')",
                facts.relation.owner_oid):
        raise SwitchRefused(reasons.ALIAS_OWNER, (
            f"view {view} is owned by role {owner}, and role {role} (the sink Secret's user) "
            f"cannot act as it: GRANT {owner} TO {role}, or ALTER VIEW {view} OWNER TO {role}"))
    changes = _column_changes(facts.columns, {c.name: c for c in new_columns})
    if changes:
        _check_recreate(conn, schema, index, facts, changes, role, superuser, view)
        select = tuple(c.name for c in new_columns)
    else:
        old = [c.name for c in facts.columns]
        select = (*old, *(c.name for c in new_columns if c.name not in old))
    return SwitchPlan(select=select, facts=facts, in_place=not changes,
                      grant_index_to=_index_grant(conn, schema, index, target,
                                                  facts.relation, role, view))


def _check_recreate(conn: psycopg.Connection[Any], schema: str, index: str, facts: AliasFacts,
                    changes: list[str], role: str, superuser: bool, view: str) -> None:
    """DROP + CREATE must keep dependents (it cannot), the owner and every grant."""
    if facts.dependents:
        raise SwitchRefused(reasons.ALIAS_DEPENDENTS, (
            f"{_listing(facts.dependents)} depend{'s' if len(facts.dependents) == 1 else ''} "
            f"on view {view}, and index {index} {'; '.join(changes)}, so the view would have "
            "to be dropped: drop the dependents and re-create them after the cutover, or keep "
            "the old columns unchanged in the new revision"))
    owner = facts.relation.owner
    if superuser or owner == role:
        return
    if not _ask(conn, "SELECT pg_has_role(current_user, %s::oid, 'MEMBER')",
                facts.relation.owner_oid):
        raise SwitchRefused(reasons.ALIAS_OWNER, (
            f"index {index} {'; '.join(changes)}, so view {view} must be re-created and given "
            f"back to its owner {owner}, which needs role {role} to be a member of it: "
            f"GRANT {owner} TO {role}"))
    if not _ask(conn, "SELECT has_schema_privilege(%s::oid, %s, 'CREATE')",
                facts.relation.owner_oid, schema):
        raise SwitchRefused(reasons.ALIAS_OWNER, (
            f"index {index} {'; '.join(changes)}, so view {view} must be re-created and given "
            f"back to its owner {owner}, which needs CREATE on schema {schema}: "
            f"GRANT CREATE ON SCHEMA {schema} TO {owner}"))
    grantors = sorted({item[0] for items in (facts.acl, *facts.column_acl.values())
                       for item in items if item[0] != owner})
    cannot = [g for g in grantors if not _ask(
        conn, "SELECT pg_has_role(current_user, (SELECT oid FROM pg_roles WHERE rolname = %s), "
              "'MEMBER')", g)]
    if cannot:
        raise SwitchRefused(reasons.ALIAS_GRANTS, (
            f"index {index} {'; '.join(changes)}, so view {view} must be re-created with its "
            f"grants, but role {role} cannot re-create those made by {_listing(cannot)}: "
            f"GRANT {cannot[0]} TO {role}, or have the owner {owner} make those grants"))


def _index_grant(conn: psycopg.Connection[Any], schema: str, index: str, target: Relation,
                 alias: Relation | None, role: str, view: str) -> str | None:
    """The view reads with its owner's privileges: can the owner read the index?"""
    if alias is None:
        readable = _ask(conn, "SELECT has_table_privilege(current_user, %s::oid, 'SELECT')",
                        target.oid)
    else:
        readable = _ask(conn, "SELECT has_table_privilege(%s::oid, %s::oid, 'SELECT')",
                        alias.owner_oid, target.oid)
    if readable:
        return None
    owner = alias.owner if alias is not None else role
    if not _ask(conn, "SELECT has_table_privilege(current_user, %s::oid, "
                      "'SELECT WITH GRANT OPTION')", target.oid):
        raise SwitchRefused(reasons.INDEX_NOT_READABLE, (
            f"view {view} reads its index with the privileges of its owner {owner}, which "
            f"cannot read {schema}.{index} (owned by {target.owner}), and role {role} cannot "
            f"grant that: GRANT SELECT ON {schema}.{index} TO {owner}"))
    return owner


# the change --------------------------------------------------------------------------------

def define(conn: psycopg.Connection[Any], schema: str, alias: str, index: str,
           plan: SwitchPlan) -> None:
    """Point the alias at `index` as planned; call inside the switch's transaction."""
    view = sql.Identifier(schema, alias)
    if plan.grant_index_to is not None:
        conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(
            sql.Identifier(schema, index), sql.Identifier(plan.grant_index_to)))
    if plan.facts is not None and not plan.in_place:
        conn.execute(sql.SQL("DROP VIEW {}").format(view))
    options = plan.facts.options if plan.facts is not None else ()
    conn.execute(sql.SQL("{verb} {view}{options} AS SELECT {cols} FROM {index}").format(
        verb=sql.SQL("CREATE OR REPLACE VIEW" if plan.in_place else "CREATE VIEW"), view=view,
        options=_with(options), cols=sql.SQL(", ").join(map(sql.Identifier, plan.select)),
        index=sql.Identifier(schema, index)))
    if plan.facts is not None and not plan.in_place:
        _restore(conn, schema, alias, plan.facts)


def _with(options: Iterable[tuple[str, str]]) -> sql.Composable:
    """CREATE OR REPLACE VIEW resets the options to its WITH list: always repeat them."""
    items = [sql.SQL("{} = {}").format(sql.Identifier(k), sql.Literal(v)) for k, v in options]
    return sql.SQL(" WITH ({})").format(sql.SQL(", ").join(items)) if items else sql.SQL("")


def _grantee(name: str) -> sql.Composable:
    return sql.SQL("PUBLIC") if name == "PUBLIC" else sql.Identifier(name)


def _restore(conn: psycopg.Connection[Any], schema: str, alias: str, facts: AliasFacts) -> None:
    """Give the re-created view its owner and grants back, and prove they match."""
    view = sql.Identifier(schema, alias)
    owner = facts.relation.owner
    current = relation(conn, schema, alias, kinds="v")
    assert current is not None
    if current.owner != owner:
        conn.execute(sql.SQL("ALTER VIEW {} OWNER TO {}").format(view, sql.Identifier(owner)))
    kept = {c.name for c in columns(conn, current.oid)}
    wanted_columns = {name: items for name, items in facts.column_acl.items() if name in kept}
    now = _acl(conn, current.oid)
    for _grantor, grantee, privilege, _grantable in sorted(now - facts.acl):
        conn.execute(sql.SQL("REVOKE {} ON {} FROM {}").format(
            sql.SQL(privilege), view, _grantee(grantee)))  # defaults the owner had given up
    grants: list[tuple[AclItem, str | None]] = [(item, None) for item in facts.acl - now]
    grants += [(item, name) for name, items in wanted_columns.items() for item in items]
    # The owner's grants first: other grantors hold a grant option from them.
    grants.sort(key=lambda g: (g[0][0] != owner, g[0][0], g[1] or "", g[0][1:]))
    for (grantor, grantee, privilege, grantable), column in grants:
        if privilege not in PRIVILEGES:
            continue
        if grantor != owner:
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(grantor)))
        what = sql.SQL(privilege) if column is None else sql.SQL("{} ({})").format(
            sql.SQL(privilege), sql.Identifier(column))
        conn.execute(sql.SQL("GRANT {} ON {} TO {}{}").format(
            what, view, _grantee(grantee),
            sql.SQL(" WITH GRANT OPTION") if grantable else sql.SQL("")))
        if grantor != owner:
            conn.execute("RESET ROLE")
    if _acl(conn, current.oid) != facts.acl or _column_acl(conn, current.oid) != wanted_columns:
        raise SwitchRefused(reasons.ALIAS_GRANTS, (
            f"could not re-create the grants of view {schema}.{alias} exactly, so nothing was "
            "changed: re-grant them as its owner"))
