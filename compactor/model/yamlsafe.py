"""The one way the project reads YAML: safe tags only, no anchors or aliases, bounded nesting.

An alias repeats a node without repeating its text: nine aliases of nine aliases of ...
("billion laughs") turn a few hundred bytes into hundreds of millions of list entries
for whoever walks the result. ``kubectl -o yaml``, Helm and mig-parted configs never
need them, so a document with an anchor or an alias is refused before it is built.

The parsing stays in libyaml when it is installed (the C scanner and parser); only
composing nodes runs in Python, where the anchor or alias is seen with its line.
Nesting is bounded by the Python stack: a document nested deeper than the composer
can recurse is refused too, rather than ending in a ``RecursionError`` traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, CollectionStartEvent, Event, ScalarEvent
from yaml.nodes import Node
from yaml.resolver import Resolver

_T = TypeVar("_T")


class YamlRefused(ValueError):
    """Well-formed YAML the project will not read; the message is one line and says where."""


class _NoAliasComposer(Composer):
    peek_event: Callable[[], Event | None]  # the parser's, C or Python (the composer stub omits it)

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()
        if isinstance(event, AliasEvent) or (isinstance(event, ScalarEvent | CollectionStartEvent) and event.anchor):
            line = f" (line {event.start_mark.line + 1})" if event.start_mark else ""
            raise YamlRefused(f"YAML anchors and aliases (&name, *name) are not accepted{line}")
        return super().compose_node(parent, index)


if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _Loader(_NoAliasComposer, CParser, SafeConstructor, Resolver):
        """libyaml's parser under the Python composer (its own C composer would resolve aliases unseen)."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _NoAliasComposer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

else:  # pragma: no cover - PyYAML built without libyaml: the pure-Python parser, same rules

    class _Loader(_NoAliasComposer, yaml.SafeLoader):  # type: ignore[no-redef]
        pass


def describe_yaml_error(exc: yaml.YAMLError) -> str:
    """``malformed YAML at line 3 column 5: <problem>``, one line (PyYAML's own message spans several)."""
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"malformed YAML{where}: {problem}"


def load_yaml_documents(text: str) -> list[Any]:
    """Every document of a YAML stream (``---`` separated); ``yaml.YAMLError`` if malformed, ``YamlRefused`` if refused."""

    def documents(loader: _Loader) -> list[Any]:
        found = []
        while loader.check_node():
            found.append(loader.construct_document(loader.get_node()))
        return found

    return _read(text, documents)


def load_yaml(text: str) -> Any:
    """The single document of a YAML text (``None`` if empty), as ``yaml.safe_load`` but refusing what it would not."""

    def document(loader: _Loader) -> Any:
        node = loader.get_single_node()
        return None if node is None else loader.construct_document(node)

    return _read(text, document)


def _read(text: str, read: Callable[[_Loader], _T]) -> _T:
    loader = _Loader(text)
    try:
        return read(loader)
    except RecursionError:
        raise YamlRefused("YAML nested too deeply to read") from None
    except YamlRefused:
        raise
    except ValueError as exc:
        # A scalar the safe constructor cannot convert: an integer of 5,000 digits, a date like 2024-02-31.
        raise YamlRefused(f"unreadable YAML value: {str(exc).splitlines()[0]}") from None
    finally:
        loader.dispose()
