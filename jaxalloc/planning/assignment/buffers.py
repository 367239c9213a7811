"""Buffer merging: which values of one block share a buffer (a view and its operand, an op computed in
place and the operand it overwrites), as a union-find with each buffer's values."""

from __future__ import annotations

from xdsl.ir import SSAValue


class BufferMerge:
    """Union-find over the values of one block, with the values of each buffer."""

    def __init__(self) -> None:
        self._parent: dict[SSAValue, SSAValue] = {}
        self._members: dict[SSAValue, list[SSAValue]] = {}

    def find(self, value: SSAValue) -> SSAValue:
        """The representative of `value`'s buffer."""
        while (up := self._parent.get(value, value)) is not value:
            value = up
        return value

    def group(self, value: SSAValue) -> list[SSAValue]:
        """The values of `value`'s buffer."""
        root = self.find(value)
        return self._members.get(root, [root])

    def join(self, value: SSAValue, into: SSAValue) -> None:
        """Put `value`'s buffer into `into`'s."""
        root, other = self.find(into), self.find(value)
        if root is other:
            return
        self._parent[other] = root
        self._members.setdefault(root, [root]).extend(self._members.pop(other, [other]))
