"""The templates table: job templates by id, beside the jobs and apart from them.

``templates``     IdMap: template id -> JobTemplate
``template_ids``  TemplateIds: the next free template id (ids are never reused)

Both are created by the first template added: a repository that never had one has
neither (``ganga_like.repository.layout`` lists them as created on use). Templates are
never monitored, indexed or given a workspace: nothing else of the registry sees them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ganga_like.repository.registry import IdAllocator
from ganga_like.repository.trees import IdMap

__all__ = ["IDS_KEY", "TABLE_KEY", "TemplateIds", "TemplateTable"]

TABLE_KEY = "templates"
IDS_KEY = "template_ids"


class TemplateIds(IdAllocator):
    """The template id counter: a class of its own, so that recovery, which finds the
    registry's tables in a file by their classes, never takes it for the job id counter."""


class TemplateTable:
    """Typed access to the templates of one connection's root."""

    def __init__(self, root: Any) -> None:
        self.root = root

    def _table(self) -> IdMap | None:
        found: IdMap | None = self.root.get(TABLE_KEY)
        return found

    def add(self, template: Any) -> int:
        """Store ``template`` under the next free id (created on first use); the id."""
        table = self._table()
        if table is None:
            table = self.root[TABLE_KEY] = IdMap()
        ids = self.root.get(IDS_KEY)
        if ids is None:
            ids = self.root[IDS_KEY] = TemplateIds()
        template_id: int = ids.allocate()
        template._put("id", template_id)
        template._p_changed = True
        table[template_id] = template
        return template_id

    def remove(self, template_id: int) -> bool:
        """Forget a template; False if there was none of that id."""
        table = self._table()
        if table is None or template_id not in table:
            return False
        del table[template_id]
        return True

    def get(self, template_id: int) -> Any:
        table = self._table()
        return None if table is None else table.get(template_id)

    def ids(self) -> list[int]:
        table = self._table()
        return [] if table is None else list(table.keys())

    def values(self) -> Iterator[Any]:
        table = self._table()
        if table is not None:
            yield from table.values()

    def __len__(self) -> int:
        table = self._table()
        return 0 if table is None else len(table)
