"""Which of a sink's indexes belong to this view: decided by the owner each index records.

Index names hash the content, so two views of the same content and sink table (in two
namespaces, or a view deleted and re-created under its name) name the same index. The
name proves nothing: each index records the view (namespace, name, UID) whose job created
it, and a view never resumes into, switches to or drops an index recorded for another.

An index with no recorded owner predates the record. It is judged the way the operator
judged it before: the alias's owner when the alias serves it (a foreign alias is refused
as `SinkTableClaimed` already), else this view's by name. Refusing them instead would
stall every view on upgrade; the next job started for such an index records its owner.

The alias is judged the same way, by the owner it records: a view deleted with
deletionPolicy Retain and created again under its name (a new UID) is another view, and
never switches, drops or repairs the alias the old one left. An alias recorded by name
only (from before) is judged by name and gets the UID at its owner's next switch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from derived_views.core.observed import IndexOwner, SinkObserved, ViewObserved


def same_view(recorded: IndexOwner, view: IndexOwner) -> bool:
    """`recorded` names `view`: same UID (a view re-created under its name is another view);
    an owner recorded without a UID by namespace/name. The adapters judge with it too."""
    if recorded.uid:
        return recorded.uid == view.uid
    return (recorded.namespace, recorded.name) == (view.namespace, view.name)


def is_owner(owner: IndexOwner, view: ViewObserved) -> bool:
    """The observed view is the one `owner` records."""
    return same_view(owner, IndexOwner(view.namespace, view.name, view.uid))


def alias_claimed_by(sink: SinkObserved | None, view: ViewObserved) -> IndexOwner | None:
    """The other view the alias records as its owner (None: no alias, unmarked, or ours)."""
    owner = sink.alias_owner if sink is not None else None
    return owner if owner is not None and not is_owner(owner, view) else None


def foreign_indexes(sink: SinkObserved | None, view: ViewObserved) -> dict[str, IndexOwner]:
    """Index -> its owner, for the observed indexes recorded as another view's."""
    if sink is None:
        return {}
    owners: Mapping[str, IndexOwner] = sink.index_owners
    return {index: owner for index, owner in owners.items()
            if index in sink.indexes and not is_owner(owner, view)}


def first_refused(indexes: Iterable[str | None], foreign: Mapping[str, IndexOwner]
                  ) -> tuple[str, IndexOwner] | None:
    """The first of `indexes` (in order) that is another view's."""
    for index in indexes:
        if index is not None and index in foreign:
            return index, foreign[index]
    return None


def refusal_message(index: str, owner: IndexOwner, view: ViewObserved,
                    qualified_alias: str,
                    alias_field: str, active: str | None) -> str:
    """Why nothing of this view touches `index`, and what to do."""
    serving = (f"; revision {active} keeps serving {qualified_alias}" if active
               else f"; {qualified_alias} is left as it is")
    return (f"index {index} belongs to {owner.describe()}, not to this view "
            f"({view.namespace}/{view.name}, uid {view.uid}): no job of this view writes into "
            f"it and it is never switched to or dropped by this view{serving}; choose another "
            f"{alias_field}, or delete the other view (or, if it is gone, drop that index)")


def claim_message(owner: IndexOwner, view: ViewObserved, qualified_alias: str, alias_field: str) -> str:
    """Why nothing of this view touches the alias another view owns, and what to do: the
    same name with another UID is a view deleted with Retain that left the alias behind."""
    me = f"{view.namespace}/{view.name}"
    indexes = f"its indexes ({qualified_alias}__*)"
    if (owner.namespace, owner.name) == (view.namespace, view.name):
        return (f"{qualified_alias} belongs to {owner.describe()}, an earlier view of this name that "
                f"left it behind (deletionPolicy Retain); this view (uid {view.uid}) is another "
                f"view, so it never switches, drops or repairs that alias and starts no job: "
                f"drop {qualified_alias} and {indexes} to build it anew, or choose another {alias_field}")
    return (f"{qualified_alias} belongs to {owner.describe()}; two views cannot share an alias, so this "
            f"view ({me}, uid {view.uid}) never switches, drops or repairs it and starts no "
            f"job: choose another {alias_field}, or, once that view is deleted and has left "
            f"them behind, drop {qualified_alias} and {indexes}")
