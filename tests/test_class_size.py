"""No class of ragmem has more than 15 public members (issue 12): a class that grows past it is split into parts.

The members counted are the public methods and properties a class gets from the ragmem classes of its MRO:
what a third-party base brings (pydantic's BaseModel, LangChain's, LlamaIndex's, ...) is not ragmem's to
keep small. A class over the limit is split by concern, as the message log is into facets
(``log.lexical``, ``log.units``, ``log.state``, ``log.forgetting``, ``log.meta``: ragmem/_store/log_base.py).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil

import ragmem

LIMIT = 15

#: Classes allowed over the limit, each with the reason.
ALLOWED = {
    "ragmem._aio.AsyncMemory": (
        "mirrors Memory one for one: its 15 methods as coroutines, and its attributes session, namespace, "
        "settings, store and state as read-only properties, plus open() and the blocking .memory"
    ),
}


def public_members(cls: type) -> set[str]:
    """The public methods and properties ``cls`` gets from the ragmem classes of its MRO."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if (klass.__module__ or "").split(".")[0] != "ragmem":
            continue
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            if inspect.isfunction(value) or isinstance(
                value, (property, staticmethod, classmethod, functools.cached_property)
            ):
                names.add(name)
    return names


def ragmem_classes() -> dict[str, type]:
    """Every class defined at the top of a module of the package (modules of missing extras are passed over)."""
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(ragmem.__path__, "ragmem."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an integration whose framework is not installed
            continue
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == module.__name__:
                found[f"{module.__name__}.{value.__qualname__}"] = value
    return found


def test_the_count_sees_methods_and_properties_of_ragmem_bases_only():
    class Base:
        def one(self): ...

        @property
        def two(self): ...

        @staticmethod
        def three(): ...

        @classmethod
        def four(cls): ...

        def _private(self): ...

        constant = 5  # data, not a member counted

    class Big(Base, dict):  # dict's own methods are not ragmem's
        pass

    for i in range(LIMIT - 3):
        setattr(Big, f"m{i}", lambda self: None)
    assert Base.__module__ == __name__ and __name__.split(".")[0] != "ragmem"
    Base.__module__ = Big.__module__ = "ragmem.made_up"  # as if defined in the package
    assert public_members(Base) == {"one", "two", "three", "four"}
    assert len(public_members(Big)) == LIMIT + 1  # what the test below would refuse
    Base.__module__ = "elsewhere"  # a third-party base no longer counts
    assert len(public_members(Big)) == LIMIT - 3


def test_the_walk_finds_the_classes_that_matter():
    names = set(ragmem_classes())
    assert {"ragmem._memory.Memory", "ragmem._store.store.Store", "ragmem._store.log.MessageLog",
            "ragmem._store.pglog.PostgresLog", "ragmem._store.index.VectorIndex",
            "ragmem._store.log_flags.LogIndex"} <= names


def test_no_class_has_more_than_15_public_members():
    over, back_under = [], []
    for name, cls in sorted(ragmem_classes().items()):
        members = public_members(cls)
        if name in ALLOWED:
            if len(members) <= LIMIT:
                back_under.append(name)
        elif len(members) > LIMIT:
            over.append(f"{name}: {len(members)} ({', '.join(sorted(members))})")
    assert not over, (f"over {LIMIT} public members: split by concern, as the message log is into facets, "
                      "or add to ALLOWED with the reason:\n" + "\n".join(over))
    assert not back_under, f"back under {LIMIT}: take them off ALLOWED: {back_under}"
