"""Every tree node a Spark plan holds, walked through py4j for the job's SQL guard.

A guard that walks only `children` and `QueryPlan.expressions` misses what Spark
keeps elsewhere: the named windows of `WINDOW w AS (...)` are a Map in
`WithWindowDefinition`, which `expressions` does not enter, and the replacements
of a pipe `|> SET` live inside `UnresolvedStarExceptOrReplace`, a leaf
expression with no children. Spark builds from them only during analysis,
inside `spark.sql()`, after functions such as `from_avro` have already read
their options. So the parsed plan is walked by what every TreeNode is, a Scala
Product: each constructor argument (`productIterator`, the basis of Spark's own
`TreeNode.mapProductIterator`, `makeCopy` and `QueryPlan.expressions`; see
sql/catalyst/.../trees/TreeNode.scala and plans/QueryPlan.scala), descending
into tree nodes, Scala and Java collections (a Map's entries too), Options,
tuples and other Products (data types among them) and Java arrays. Nothing is
skipped by name. What is none of these is not entered: strings and numbers, and
in a parsed plan literal values (UTF8String, Decimal), Metadata, enumeration
values and functions (UnresolvedAlias's name builder), none of which holds a
tree.

The analysed plan, where analysis has put every expression into its node's
fields, is walked with Spark's accessors: `children`, `innerChildren` (the
subquery plans: `QueryPlan.subqueries`), `expressions` and each expression's
`children`, stopping at the view `events` (the job's own plan).

The walks cost a py4j round trip per object (its class name), per field or
element fetched and per proxy py4j later frees, and a few more per class the
first time one is met (cached per process); nothing ends in a Java exception
(py4j's own iteration does, and PySpark then spends a round trip per exception
class it knows). Nodes are named by their class's simple name (Spark's
`nodeName`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from py4j.java_gateway import JavaObject  # type: ignore[import-untyped]

PLAN, EXPRESSION = "plan", "expression"
"""The kinds of node the walks hand to the judge."""
_SEQ, _ITERABLE, _PRODUCT, _ARRAY, _JAVA_COLLECTION, _JAVA_ITERABLE, _JAVA_MAP, _OTHER = (
    "seq", "iterable", "product", "array", "java collection", "java iterable", "java map",
    "other")
_KINDS: tuple[tuple[str, str], ...] = (
    ("org.apache.spark.sql.catalyst.expressions.Expression", EXPRESSION),
    ("org.apache.spark.sql.catalyst.plans.logical.LogicalPlan", PLAN),
    ("scala.collection.Seq", _SEQ),
    ("scala.Product", _PRODUCT),
    ("scala.collection.Iterable", _ITERABLE),
    ("java.util.Collection", _JAVA_COLLECTION),
    ("java.lang.Iterable", _JAVA_ITERABLE),
    ("java.util.Map", _JAVA_MAP),
)
"""The first of these a class is, else a leaf. Order matters (a tree node is a Product, a
List is a Product and a Seq), and the commonest come first: a class met for the first time
costs one round trip per kind tried. Any other TreeNode is walked as the Product it is; a
data type too (a parsed plan's types come from SQL's type syntax, which names built-in types
only: the strings Spark reads as types are the guard's to judge)."""
MAX_OBJECTS = 200_000
"""More objects than the largest SQL a view may have (64 KiB) makes: a plan beyond it is
not walked to the end but refused."""
_LEAF, _UNARY = ("org.apache.spark.sql.catalyst.trees.LeafLike",
                 "org.apache.spark.sql.catalyst.trees.UnaryLike")
"""Spark's traits of nodes whose `children` is final: Nil (not asked), or `child` alone (one
round trip instead of a Seq's three)."""
_kind_of_class: dict[str, str] = {}
_arity_of_class: dict[str, int] = {}
_arity_trait_of_class: dict[str, str | None] = {}
"""Per class name, for the process: a class is the same class in every plan."""


_per_jvm: list[tuple[Any, Any, dict[str, Any]]] = []
"""(jvm, its ClassUtils.getName, its Class handles by name): resolving a static method costs
py4j a round trip per package of its name, a handle one more; each is made once per JVM
view (and kept with it, so the view is never mistaken for another)."""


def _of(jvm: Any) -> tuple[Any, dict[str, Any]]:
    for known, member, handles in _per_jvm:
        if known is jvm:
            return member, handles
    member, handles = jvm.org.apache.commons.lang3.ClassUtils.getName, {}
    _per_jvm.append((jvm, member, handles))
    return member, handles


def class_name_of(jvm: Any) -> Any:
    """`ClassUtils.getName(obj, "")` of commons-lang3 (a Spark dependency): an object's class
    name in one round trip, not two (getClass, getName)."""
    return _of(jvm)[0]


def _handles_of(jvm: Any) -> dict[str, Any]:
    return _of(jvm)[1]


class TooLarge(Exception):
    """The plan holds more than MAX_OBJECTS objects: refused, not judged."""


@dataclass(frozen=True)
class Node:
    """A tree node met by a walk: the py4j object, Spark's `nodeName`, its kind, how many
    plans enclose it and how many expressions enclose it within its plan."""

    obj: Any
    name: str
    kind: str
    plans: int
    expressions: int


class _Classes:
    """py4j handles on the classes of _KINDS and Spark's traits, each made when first
    needed, and what they say of each class met."""

    def __init__(self, jvm: Any) -> None:
        self._jvm = jvm
        self._handles = _handles_of(jvm)
        self.class_name = class_name_of(jvm)

    def kind(self, obj: Any, class_name: str) -> str:
        kind = _kind_of_class.get(class_name)
        if kind is None:
            kind = _ARRAY if class_name.startswith("[") else self._classify(obj)
            _kind_of_class[class_name] = kind
        return kind

    def arity_trait(self, obj: Any, class_name: str) -> str | None:
        """_LEAF, _UNARY or None: which of Spark's traits fixes the node's `children`."""
        if class_name not in _arity_trait_of_class:
            _arity_trait_of_class[class_name] = next(
                (trait for trait in (_LEAF, _UNARY) if self._handle(trait).isInstance(obj)),
                None)
        return _arity_trait_of_class[class_name]

    def identity(self) -> Any:
        """Scala's identity function (`Predef.$conforms`), for TreeNode.map."""
        if "$identity" not in self._handles:
            self._handles["$identity"] = getattr(self._jvm.scala.Predef, "$conforms")()
        return self._handles["$identity"]

    def _handle(self, name: str) -> Any:
        handle = self._handles.get(name)
        if handle is None:
            handle = self._handles[name] = self._jvm.java.lang.Class.forName(name)
        return handle

    def _classify(self, obj: Any) -> str:
        for name, kind in _KINDS:
            if self._handle(name).isInstance(obj):
                return kind
        return _OTHER


def parsed_nodes(jvm: Any, root: Any) -> Iterator[Node]:
    """Every tree node under `root` (a parsed plan), depth first, a node before what it holds,
    fields in constructor order; also those that children/expressions would not reach."""
    classes = _Classes(jvm)
    stack: list[tuple[Any, int, int]] = [(root, 0, 0)]
    seen = 0
    while stack:
        value, plans, expressions = stack.pop()
        if not isinstance(value, JavaObject):
            continue  # str, int, float, bool, bytes, None: py4j converted them, no tree
        seen += 1
        if seen > MAX_OBJECTS:
            raise TooLarge(f"the query's plan holds more than {MAX_OBJECTS} objects: "
                           "simplify it")
        class_name = str(classes.class_name(value, ""))
        kind = classes.kind(value, class_name)
        held: list[Any]
        if kind in (PLAN, EXPRESSION):
            if kind == PLAN:
                plans, expressions = plans + 1, 0
            else:
                expressions += 1
            yield Node(value, simple_name(class_name), kind, plans, expressions)
            held = _fields(value, class_name)
        elif kind == _PRODUCT:  # Some, tuples (a Map's entries), case classes, data types
            held = _fields(value, class_name)
        elif kind == _SEQ:
            held = [value.apply(i) for i in range(value.size())]
        elif kind == _ITERABLE:  # Map, Set: as a Vector, whose apply is cheap
            vector = value.toVector()
            held = [vector.apply(i) for i in range(vector.size())]
        elif kind == _ARRAY:
            held = _indexed(value)
        elif kind == _JAVA_COLLECTION:
            held = _indexed(value.toArray()) if value.size() else []
        elif kind == _JAVA_ITERABLE:
            held = _java_items(value.iterator())
        elif kind == _JAVA_MAP:
            held = (_indexed(value.keySet().toArray()) + _indexed(value.values().toArray())
                    if value.size() else [])
        else:
            continue
        stack.extend((item, plans, expressions) for item in reversed(held))


def analysed_nodes(jvm: Any, root: Any, stop_at: str = "View") -> Iterator[Node]:
    """Every plan node and expression of an analysed plan through Spark's own accessors:
    children and innerChildren (the subquery plans) of each plan, not below a `stop_at`
    node; its `expressions`, each with every node under it (`TreeNode.map` of the identity:
    one round trip for a whole expression). Expressions are reported at depth 1: the parsed
    plan's depth was judged."""
    classes = _Classes(jvm)
    everything = classes.identity()
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        plan, plans = stack.pop()
        class_name = str(classes.class_name(plan, ""))
        name = simple_name(class_name)
        yield Node(plan, name, PLAN, plans, 0)
        if name == stop_at:
            continue
        for top in _seq(plan.expressions()):
            top_class = str(classes.class_name(top, ""))
            if classes.arity_trait(top, top_class) == _LEAF:  # an attribute, a literal
                yield Node(top, simple_name(top_class), EXPRESSION, plans, 1)
                continue
            for expression in _seq(top.map(everything)):
                yield Node(expression, simple_name(str(classes.class_name(expression, ""))),
                           EXPRESSION, plans, 1)
        stack.extend((child, plans + 1) for child in reversed(_seq(plan.innerChildren())))
        arity = classes.arity_trait(plan, class_name)
        if arity == _UNARY:
            stack.append((plan.child(), plans + 1))
        elif arity is None:
            stack.extend((child, plans + 1) for child in reversed(_seq(plan.children())))


def accessor_nodes(jvm: Any, root: Any, stop_at: str | None = None) -> Iterator[Any]:
    """Every node reached through TreeNode's and QueryPlan's accessors alone: children and
    innerChildren of every node, a plan's expressions; not below a `stop_at` plan. What the
    walks above must reach at least (the tests hold them so, on parsed and analysed plans)."""
    plan_class = jvm.java.lang.Class.forName(
        "org.apache.spark.sql.catalyst.plans.logical.LogicalPlan")
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if stop_at is not None and str(node.nodeName()) == stop_at:
            continue
        stack.extend(_seq(node.children()))
        stack.extend(_seq(node.innerChildren()))
        if plan_class.isInstance(node):
            stack.extend(_seq(node.expressions()))


def simple_name(class_name: str) -> str:
    """org.apache.spark...UnresolvedFunction -> UnresolvedFunction (Spark's nodeName)."""
    return class_name.rsplit(".", 1)[-1].rsplit("$", 1)[-1] or class_name


def _fields(value: Any, class_name: str) -> list[Any]:
    arity = _arity_of_class.get(class_name)
    if arity is None:
        arity = _arity_of_class[class_name] = int(value.productArity())
    return [value.productElement(i) for i in range(arity)]


def _indexed(array: Any) -> list[Any]:
    """A Java array or list by index: py4j's own iteration ends in an exception, which costs
    a round trip per known exception class (PySpark converts them)."""
    return [array[i] for i in range(len(array))]


def _java_items(iterator: Any) -> list[Any]:
    """A java.util.Iterator's items, asking hasNext (py4j's own iteration ends in an
    exception)."""
    items = []
    while iterator.hasNext():
        items.append(iterator.next())
    return items


def _seq(seq: Any) -> list[Any]:
    """A Scala Seq through py4j, as a list (size and apply: the fewest round trips)."""
    return [seq.apply(i) for i in range(seq.size())]
