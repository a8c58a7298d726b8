"""Name -> object registries, one per family (models, initial densities, schemes, ...).

Registry keys are exactly the strings used in configuration files, netCDF attributes and
docs/models.md. A failed lookup raises :class:`~spheredens.exceptions.ConfigError` listing the
registered names.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from .exceptions import ConfigError, shown


class Registry:
    """A mapping from configuration names to objects of one family.

    Parameters
    ----------
    family : str
        What the registry holds, used in error messages (e.g. ``"initial density"``).
    """

    def __init__(self, family: str) -> None:
        self.family = family
        self._items: dict[str, Any] = {}

    def register(self, name: str) -> Callable[[Any], Any]:
        """Decorator registering an object under ``name``."""

        def decorator(obj: Any) -> Any:
            if name in self._items:
                raise RuntimeError(f"{self.family} {name!r} registered twice")
            self._items[name] = obj
            return obj

        return decorator

    def get(self, name: Any, key: str = "") -> Any:
        """The object registered under ``name``; a ConfigError naming ``key`` otherwise."""
        if not isinstance(name, str) or name not in self._items:
            raise ConfigError(
                key,
                f"{shown(name)} is not a known {self.family}; choose one of {self.quoted_names()}",
            )
        return self._items[name]

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._items)

    def quoted_names(self) -> str:
        return ", ".join(repr(n) for n in self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)
