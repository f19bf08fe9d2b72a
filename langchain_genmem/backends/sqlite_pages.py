"""Reading the pages of a SQLite database file, and zeroing what no page structure uses.

The file format is SQLite's documented, stable one (https://www.sqlite.org/fileformat2.html):
a header on page 1, a freelist of trunk and leaf pages, b-tree pages of four kinds (table or
index, interior or leaf) with a cell pointer array growing from the page header and cells
growing from the page end, free space between them and in a chain of freeblocks, and
payloads too large for a page spilling into chains of overflow pages.

:class:`Pages` reads pages straight from the file, finds the pages of a b-tree (all of them,
those on the way to a rowid, those holding an index's entries of one first-column value) and
the bytes no structure uses (:func:`free_spans`, :meth:`Pages.freelist`,
:meth:`Pages.overflow_tail`), and zeroes them. It is used by
:mod:`~langchain_genmem.backends.chroma_erase`, in a process of its own, while that process's
own SQLite connection holds the database's EXCLUSIVE lock: no other connection reads or
writes the file meanwhile, and that connection's next commit changes the file change
counter, so every other connection drops the pages it cached. This module imports nothing
but the standard library (the erasing process runs it by path).
"""

from __future__ import annotations

import mmap
import os
import struct
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

MAGIC = b"SQLite format 3\x00"
HEADER_SIZE = 100
TABLE_INTERIOR, TABLE_LEAF, INDEX_INTERIOR, INDEX_LEAF = 5, 13, 2, 10
KINDS = frozenset({TABLE_INTERIOR, TABLE_LEAF, INDEX_INTERIOR, INDEX_LEAF})
MAX_DEPTH = 40  # a b-tree of 4 KB pages is a few levels deep; deeper means a damaged file


class FormatError(Exception):
    """The file is not laid out as SQLite's file format says (or not as expected here)."""


@dataclass(frozen=True)
class Page:
    """One b-tree page: its number, bytes, and where its header starts (100 on page 1)."""

    number: int
    data: bytes
    start: int

    @property
    def kind(self) -> int:
        """The page type byte."""
        return self.data[self.start]

    @property
    def interior(self) -> bool:
        """Whether it is an interior page."""
        return self.kind in (TABLE_INTERIOR, INDEX_INTERIOR)

    @property
    def cells(self) -> int:
        """How many cells it holds."""
        return _u16(self.data, self.start + 3)

    @property
    def pointers(self) -> int:
        """Where the cell pointer array starts."""
        return self.start + (12 if self.interior else 8)

    def cell_offsets(self) -> list[int]:
        """The offset of each cell, in key order."""
        return list(struct.unpack_from(f">{self.cells}H", self.data, self.pointers))

    def right_child(self) -> int:
        """The right-most child of an interior page."""
        return _u32(self.data, self.start + 8)


def free_spans(page: Page, usable: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` byte ranges of a b-tree page that hold no live structure.

    They are the gap between the cell pointer array and the cell content area, and each
    freeblock but its 4-byte header (the link to the next one and its size). Fragments of
    at most 3 bytes between cells are not listed (they cannot be told without parsing every
    cell, and hold too little to matter).

    Raises:
        FormatError: the header or the freeblock chain points outside the page.
    """
    data, start = page.data, page.start
    content = _u16(data, start + 5) or 65536
    gap_start = page.pointers + 2 * page.cells
    if not gap_start <= content <= usable:
        msg = f"page {page.number}: its cells overlap its header"
        raise FormatError(msg)
    spans = [(gap_start, content)] if content > gap_start else []
    block, seen = _u16(data, start + 1), 0
    while block:
        size = _u16(data, block + 2)
        if block < content or block + size > usable or size < 4 or seen > usable // 4:
            msg = f"page {page.number}: a freeblock lies outside its content area"
            raise FormatError(msg)
        if size > 4:
            spans.append((block + 4, block + size))
        block, seen = _u16(data, block), seen + 1
    return spans


class Pages:
    """The pages of one SQLite database file, read and written in place.

    Args:
        fd: a file descriptor of the database, open for reading and writing.
        view: the file mapped in memory (read through it: no system call a page), or None.

    Raises:
        FormatError: the file is not a UTF-8 SQLite database this module can read.
    """

    def __init__(self, fd: int, view: mmap.mmap | None = None) -> None:
        self.fd = fd
        self.view = view
        head = _pread(fd, HEADER_SIZE, 0)
        if len(head) < HEADER_SIZE or head[:16] != MAGIC:
            msg = "not a SQLite 3 database"
            raise FormatError(msg)
        size = _u16(head, 16)
        self.size = 65536 if size == 1 else size
        self.reserved = head[20]  # bytes at each page's end that an extension may use
        self.usable = self.size - self.reserved
        if _u32(head, 56) not in (0, 1):
            msg = "the database's text encoding is not UTF-8"
            raise FormatError(msg)
        in_file = os.fstat(fd).st_size // self.size
        valid = _u32(head, 92) == _u32(head, 24)  # the header's page count is current
        self.count = min(_u32(head, 28), in_file) if valid and _u32(head, 28) else in_file
        self.written = 0  # bytes zeroed in place

    # reading

    def read(self, number: int) -> bytes:
        """The bytes of page ``number`` (numbered from 1).

        Raises:
            FormatError: the page is not in the file.
        """
        if not 1 <= number <= self.count:
            msg = f"page {number} is outside the file ({self.count} pages)"
            raise FormatError(msg)
        at = (number - 1) * self.size
        if self.view is not None and at + self.size <= len(self.view):
            return self.view[at : at + self.size]
        data = _pread(self.fd, self.size, at)
        if len(data) != self.size:
            msg = f"page {number} is cut short"
            raise FormatError(msg)
        return data

    def read_many(self, numbers: Sequence[int], run: int = 256) -> Iterator[tuple[int, bytes]]:
        """``(number, bytes)`` of each page of ``numbers``, read in runs of adjacent pages.

        Raises:
            FormatError: a page is not in the file.
        """
        ordered = sorted(set(numbers))
        i = 0
        while i < len(ordered):
            j = i + 1
            while j < len(ordered) and ordered[j] == ordered[j - 1] + 1 and j - i < run:
                j += 1
            first, count = ordered[i], j - i
            if first < 1 or first + count - 1 > self.count:
                msg = f"pages {first}..{first + count - 1} are outside the file"
                raise FormatError(msg)
            at = (first - 1) * self.size
            if self.view is not None and at + count * self.size <= len(self.view):
                data = self.view[at : at + count * self.size]
            else:
                data = _pread(self.fd, count * self.size, at)
            if len(data) != count * self.size:
                msg = f"page {first + count - 1} is cut short"
                raise FormatError(msg)
            for k in range(count):
                yield first + k, data[k * self.size : (k + 1) * self.size]
            i = j

    def page(self, number: int) -> Page:
        """The b-tree page ``number``.

        Raises:
            FormatError: it is not a b-tree page.
        """
        page = Page(number, self.read(number), HEADER_SIZE if number == 1 else 0)
        if page.kind not in KINDS:
            msg = f"page {number} is not a b-tree page"
            raise FormatError(msg)
        return page

    def freelist(self) -> tuple[list[tuple[int, int]], list[int]]:
        """The freelist: each trunk page with its count of leaves, and every leaf page.

        Raises:
            FormatError: the freelist is not as the header says.
        """
        head = _pread(self.fd, HEADER_SIZE, 0)
        trunk, total = _u32(head, 32), _u32(head, 36)
        trunks: list[tuple[int, int]] = []
        leaves: list[int] = []
        while trunk:
            data = self.read(trunk)
            count = _u32(data, 4)
            if count > self.usable // 4 - 2 or len(trunks) > total:
                msg = f"freelist trunk page {trunk} is not as expected"
                raise FormatError(msg)
            trunks.append((trunk, count))
            leaves.extend(struct.unpack_from(f">{count}I", data, 8))
            trunk = _u32(data, 0)
        if len(trunks) + len(leaves) != total:
            msg = f"the freelist holds {len(trunks) + len(leaves)} pages, the header says {total}"
            raise FormatError(msg)
        return trunks, leaves

    def tree(self, root: int) -> Iterator[Page]:
        """Every page of the b-tree rooted at ``root``, each once."""
        stack, seen = [root], set()
        while stack:
            number = stack.pop()
            if number in seen:
                msg = f"the b-tree at page {root} reaches page {number} twice"
                raise FormatError(msg)
            seen.add(number)
            page = self.page(number)
            yield page
            if page.interior:
                stack.extend(self.children(page))

    def children(self, page: Page) -> list[int]:
        """The child pages of an interior page, left to right."""
        return [_u32(page.data, at) for at in page.cell_offsets()] + [page.right_child()]

    def around_rowids(self, root: int, rowids: Sequence[int]) -> dict[int, Page]:
        """The pages of a table b-tree that hold ``rowids`` or sit next to them.

        Every page on the way from the root to each rowid's leaf, and the leaf right before
        and after it (with the pages on the way): where a page split left copies of the
        cells it moved. One walk for all rowids.
        """
        targets = sorted(set(rowids))

        def ranges(page: Page, lo: int, hi: int) -> list[tuple[int, int]]:
            keys = [_varint(page.data, at + 4)[0] for at in page.cell_offsets()]
            bounds = [lo, *(bisect_right(targets, key, lo, hi) for key in keys), hi]
            return [(bounds[i], bounds[i + 1]) for i in range(len(keys) + 1)]

        return self._walk(root, len(targets), (TABLE_INTERIOR, TABLE_LEAF), ranges) or {}

    def around_keys(self, root: int, keys: Sequence[tuple[bytes, bytes]],
                    limit: int | None = None) -> dict[int, Page] | None:
        """The pages of an index b-tree that hold entries of ``keys`` or sit next to them.

        As :meth:`around_rowids` says.

        Args:
            root: the index's root page.
            keys: ``(first column, prefix of the second)`` texts, no prefix of another: an
                entry is one of a key when its first column is the key's first and its
                second starts with the key's prefix.
            limit: at most this many pages (None when there are more).
        """
        targets = sorted(set(keys))

        def ranges(page: Page, lo: int, hi: int) -> list[tuple[int, int]]:
            cells = [self._key_of(page, at + 4) for at in page.cell_offsets()]
            return _index_ranges(cells, targets, lo, hi)

        return self._walk(root, len(targets), (INDEX_INTERIOR, INDEX_LEAF), ranges, limit)

    def _walk(self, root: int, targets: int, kinds: tuple[int, int],
              ranges: Callable[[Page, int, int], list[tuple[int, int]]],
              limit: int | None = None) -> dict[int, Page] | None:
        """Walk a b-tree to the leaves of targets ``0 .. targets - 1`` and their neighbours.

        ``ranges(page, lo, hi)`` splits the targets ``lo .. hi - 1`` of an interior page
        among its children. A neighbour is walked along its edge: its last child when it is
        left of a target's page, its first when right. None: over ``limit`` pages.
        """
        out: dict[int, Page] = {}
        stack = [(root, 0, targets, 0, 0)] if targets else []
        walked: set[tuple[int, int, int, int, int]] = set()
        while stack:
            step = stack.pop()
            if step in walked:
                continue
            walked.add(step)
            number, lo, hi, depth, edge = step
            page = out.get(number) or self.page(number)
            if page.kind not in kinds or depth > MAX_DEPTH:
                msg = f"page {number} is not a page of the b-tree walked"
                raise FormatError(msg)
            out[number] = page
            if limit is not None and len(out) > limit:
                return None
            if not page.interior:
                continue
            children = self.children(page)
            if edge:
                stack.append((children[-1 if edge < 0 else 0], 0, 0, depth + 1, edge))
                continue
            split = ranges(page, lo, hi)
            chosen = [i for i, (a, b) in enumerate(split) if b > a]
            stack += [(children[i], *split[i], depth + 1, 0) for i in chosen]
            stack += [(children[j], 0, 0, depth + 1, side) for i in chosen
                      for j, side in ((i - 1, -1), (i + 1, 1))
                      if 0 <= j < len(children) and j not in chosen]
        return out

    def _key_of(self, page: Page, at: int) -> tuple[bytes, bytes]:
        """The first column and the local start of the second of an index record.

        ``at`` is where its payload size varint is; texts (another type reads as empty).
        """
        data = page.data
        payload, at = _varint(data, at)
        end = min(at + self.local_size(payload, False), self.usable)
        header, pos = _varint(data, at)
        body = at + header
        columns: list[bytes] = []
        while len(columns) < 2 and pos < at + header:
            serial, pos = _varint(data, pos)
            size = _serial_size(serial)
            text = serial >= 13 and serial % 2 == 1
            columns.append(bytes(data[body:min(body + size, end)]) if text else b"")
            body += size
        columns += [b""] * (2 - len(columns))
        return columns[0], columns[1]

    # payloads spilling into overflow pages

    def local_size(self, payload: int, table: bool) -> int:
        """How many bytes of a payload of ``payload`` bytes a b-tree page holds itself."""
        usable = self.usable
        most = usable - 35 if table else (usable - 12) * 64 // 255 - 23
        if payload <= most:
            return payload
        least = (usable - 12) * 32 // 255 - 23
        local = least + (payload - least) % (usable - 4)
        return local if local <= most else least

    def overflow_tail(self, page: Page, at: int) -> tuple[int, int, int] | None:
        """Where the unused tail of the last overflow page of the cell at ``at`` lies.

        Returns:
            ``(page number, start, end)``, or None when the cell holds its payload whole
            or the chain's last page is full.

        Raises:
            FormatError: the chain is not as long as the payload needs.
        """
        data, table = page.data, page.kind in (TABLE_LEAF, TABLE_INTERIOR)
        if page.kind == TABLE_INTERIOR:
            return None  # only keys: no payload
        pos = at + 4 if page.kind == INDEX_INTERIOR else at
        payload, pos = _varint(data, pos)
        if page.kind == TABLE_LEAF:
            _, pos = _varint(data, pos)  # the rowid
        local = self.local_size(payload, table)
        if local == payload:
            return None
        link, left, hops = _u32(data, pos + local), payload - local, 0
        room = self.usable - 4
        while left > room:
            link, left, hops = _u32(self.read(link), 0), left - room, hops + 1
            if not link or hops > self.count:
                msg = f"page {page.number}: an overflow chain ends early"
                raise FormatError(msg)
        if not link:
            msg = f"page {page.number}: an overflow chain ends early"
            raise FormatError(msg)
        return None if left == room else (link, 4 + left, self.usable)

    # writing

    def zero(self, number: int, spans: list[tuple[int, int]], data: bytes | None = None) -> int:
        """Zero byte ranges of page ``number`` that hold anything; how many bytes were.

        Args:
            number: the page.
            spans: ``(start, end)`` offsets in the page.
            data: the page's bytes when already read.
        """
        data = self.read(number) if data is None else data
        base, written = (number - 1) * self.size, 0
        for start, end in spans:
            if end > start and data[start:end].count(0) != end - start:
                _pwrite(self.fd, bytes(end - start), base + start)
                written += end - start
        self.written += written
        return written


def _index_ranges(cells: list[tuple[bytes, bytes]], targets: list[tuple[bytes, bytes]],
                  lo: int, hi: int) -> list[tuple[int, int]]:
    """Which of the sorted targets ``lo .. hi - 1`` each child of an interior page may hold.

    Child ``i`` holds the entries above cell ``i - 1`` and up to cell ``i``.
    """
    out, start, end = [], lo, lo
    for i in range(len(cells) + 1):
        if i > 0:  # skip the targets whose entries all sort before cell i - 1
            while start < hi and _past(cells[i - 1], targets[start]):
                start += 1
        if i < len(cells):  # the targets whose entries may sort up to cell i
            end = max(end, start)
            while end < hi and targets[end] <= cells[i]:
                end += 1
        else:
            end = hi
        out.append((start, max(start, end)))
    return out


def _past(cell: tuple[bytes, bytes], target: tuple[bytes, bytes]) -> bool:
    """Whether ``cell`` sorts after every entry of ``target`` (a first column and prefix)."""
    first, prefix = target
    return cell[0] > first or (cell[0] == first and cell[1][: len(prefix)] > prefix)


def _serial_size(serial: int) -> int:
    """The body size of a record column of serial type ``serial``."""
    if serial >= 12:
        return (serial - 12) // 2 if serial % 2 == 0 else (serial - 13) // 2
    return (0, 1, 2, 3, 4, 6, 8, 8, 0, 0, 0, 0)[serial]


def _pread(fd: int, size: int, at: int) -> bytes:
    """``size`` bytes of the file at offset ``at`` (where the system has no pread: seek)."""
    if hasattr(os, "pread"):
        return os.pread(fd, size, at)
    os.lseek(fd, at, os.SEEK_SET)  # pragma: no cover - Windows
    return os.read(fd, size)  # pragma: no cover


def _pwrite(fd: int, data: bytes, at: int) -> None:
    """Write ``data`` at offset ``at`` of the file."""
    if hasattr(os, "pwrite"):
        os.pwrite(fd, data, at)
        return
    os.lseek(fd, at, os.SEEK_SET)  # pragma: no cover - Windows
    os.write(fd, data)  # pragma: no cover


def _u16(data: bytes, at: int) -> int:
    return int(struct.unpack_from(">H", data, at)[0])


def _u32(data: bytes, at: int) -> int:
    return int(struct.unpack_from(">I", data, at)[0])


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's variable-length integer at ``at``: its value and where it ends."""
    value = 0
    for i in range(8):
        byte = data[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | data[at + 8], at + 9
