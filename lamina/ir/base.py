"""Uniqued (hash-consed) immutable objects: the base of types, attributes and locations.

Every ``Type``, most ``Attribute`` s and every ``Location`` is created through its class's
``__call__``, which normalises the arguments to a key and returns the one instance that exists for
that key. Two equal types are therefore the *same object*: comparing them is an identity check,
hashing them is ``id``-based, and building the same type twice costs one dict lookup.

Large, data-carrying attributes (dense elements backed by numpy) opt out of uniquing by setting
``_uniqued = False`` and define value equality themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar


class UniquedMeta(type):
    """Metaclass that interns instances by ``cls._key(*args, **kwargs)``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if not cls._uniqued:  # type: ignore[attr-defined]
            return super().__call__(*args, **kwargs)
        key = cls._key(*args, **kwargs)  # type: ignore[attr-defined]
        cache = cls._instances  # type: ignore[attr-defined]
        inst = cache.get(key)
        if inst is None:
            inst = cls.__new__(cls)  # type: ignore[call-overload]  # a metaclass method: cls is the class
            inst._init(*key)
            cache[key] = inst
        return inst


class Uniqued(metaclass=UniquedMeta):
    """Base of uniqued immutable IR objects.

    Subclasses declare ``__slots__``, a ``_key`` classmethod that turns constructor arguments into a
    hashable tuple (normalising them: lists to tuples, ints to ints, ...) and ``_init(*key)`` that
    fills the slots from that tuple. Each subclass gets its own instance table.
    """

    __slots__ = ("_str",)
    _uniqued: ClassVar[bool] = True
    _instances: ClassVar[dict]

    if TYPE_CHECKING:
        # Instances are made by ``UniquedMeta.__call__`` from ``_key``'s arguments; this tells the
        # type checker that constructors take arguments (each class's ``_key`` says which).
        def __init__(self, *args: Any, **kwargs: Any) -> None: ...

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls._instances = {}

    @classmethod
    def _key(cls, *args: Any) -> tuple:
        return args

    def _init(self, *key: Any) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _set(self, **fields: Any) -> None:
        for k, v in fields.items():
            object.__setattr__(self, k, v)

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: Any) -> Any:
        return self

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self._params()))

    def _params(self) -> tuple:
        """Constructor arguments that rebuild this object (used for pickling)."""
        raise NotImplementedError

    def __str__(self) -> str:
        s = getattr(self, "_str", None)
        if s is None:
            from lamina.ir.printer import print_attribute_or_type

            s = print_attribute_or_type(self)
            object.__setattr__(self, "_str", s)
        return s

    def __repr__(self) -> str:
        return str(self)


def _rebuild(cls: type, params: tuple) -> Any:
    return cls(*params)
