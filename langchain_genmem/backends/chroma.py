"""Chroma backend: one collection of nodes, one small collection of per-persona states.

Layout (personas may share both collections; every read names its persona):

- ``<name>``: one record per node, id ``"<persona>::node_N"``, the node's vector as its
  embedding and at most five metadata keys (record format 2): ``persona`` and
  ``node_count`` (what the ``where`` filters of this module select on), ``last_accessed``
  (absent while it is ``created``, as for every new memory; set alone by
  :meth:`ChromaBackend.write_access`), ``expiration`` (absent when None) and ``node``:
  every other field and the description packed as one JSON object (datetimes as float
  epochs; ``embedding_key`` left out when it is the description, ``conversation`` and
  ``speaker`` when None). No Chroma document.
  Measured here, a key per field and Chroma's full-text index of documents made bulk
  writes about twice as slow. Format-1 records (written before: a key per field, keywords
  and filling as JSON text, the description as the document) are read as well, so older
  stores open as they were and take format-2 records beside their own
  (:func:`_node_from`). :func:`_meta_of` names every key (None for an absent one), so a
  write over an existing record replaces it whole; :meth:`ChromaBackend.commit` writes only
  ids that no record holds (leftovers are removed first) and leaves the None keys out.
- ``<name>-state``: one record per persona, id ``"<persona>::state"``, a 1-d dummy vector,
  metadata ``{persona, rev, node_count}`` and the whole :class:`StreamState` as JSON document.
- Single-memory commits (an agent's ``add_event`` every step): the node record itself is the
  commit. It carries, under the metadata key ``commit``, the state change it makes (every
  state field but ``kw_strength`` and ``extra``, the keyword strengths it changed, and the
  entries of ``extra`` it set or removed, up to :data:`PATCH_MAX` characters: a LangGraph
  store's key records live there and grow with its items), so
  one Chroma write stores the memory and commits it, and a crash leaves it whole or absent.
  The committed state is the state record followed by the run of such records right above
  its ``node_count`` (``node_{N+1}``, ``node_{N+2}``, ... each carrying ``commit`` for its
  own number); at most :data:`CHAIN_MAX` of them, then a commit writes the state record
  again. A record above the committed count without ``commit`` is a crashed write's
  leftover (removed at the next write), never part of the run.
- Forgetting (:meth:`ChromaBackend.forget`; Chroma has no transactions): the persona's
  snapshot file is deleted, kept turns that quoted a forgotten one get their new embedded
  text and vector, then the state record that lists the forgotten (and re-keyed) numbers is
  written, with the metadata key ``forgetting`` set to its revision: that write is the
  commit point. Then the node records of every range forgotten at that revision or later
  are deleted, and ``forgetting`` is removed. A forget interrupted after the commit point
  is finished by the next write of the persona (:meth:`ChromaBackend.remove_uncommitted`,
  which sees the key); meanwhile every reader gets the new state and
  :meth:`ChromaBackend.read_nodes` leaves the forgotten records out, so only a reader of
  the raw Chroma collection could still see them. Before the commit point nothing changed
  but the snapshot (the next open reads Chroma and writes it again). In an embedded folder
  the deletion erases every copy of the records from the folder's files as well, before
  ``forgetting`` is removed (:mod:`~langchain_genmem.backends.chroma_erase`).
- ``<name>-lease`` (server clients only): one write lease per persona being written, and
  a fence record per lease ever taken over from a holder that lost it. Records written
  under a lease carry its token (metadata ``lease``). A single-memory commit there counts
  only once its writer is done with the lease: a reader trusts a run record only when the
  lease no longer holds its token and no fence names it (one more get, for runs only).
  So a record whose writer lost the lease mid-write (and deletes it again, only its own:
  deletes are conditional on the token) is never seen by a reader, and a writer that
  finished its write and gave the lease back is seen by everyone.

Writers (:meth:`ChromaBackend.write_lock`): threads of one process are serialised; on a
Chroma server (``HttpClient``) writers in many processes are serialised by a lease
(:class:`~langchain_genmem.backends.locks.Lease`); an embedded folder (``PersistentClient``)
is written by one process at a time, the others are refused
(:class:`~langchain_genmem.backends.locks.FolderLock`): a process that opened the folder
before another one wrote it is refused as well (its Chroma index misses that write), and a
running ``genmem serve`` or ``genmem mcp`` owns its folder from its start. Other processes'
reads of a folder wait for the write in flight, and a stream's open or catch-up reads one
moment (:class:`~langchain_genmem.backends.gate.FolderGate`, the ``"views"`` capability); a
read that needs what another process wrote after this process first read the folder gets
:class:`~langchain_genmem.core.errors.ConcurrentWriterError` naming it.

Chroma caps ``add`` batches (about 5,461 records) and ``get`` pages (32,766 ids); both are
paged here (reads in pages of :data:`GET_PAGE`). Chroma returns float64 vectors of the
float32 values it stores.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from langchain_genmem.backends import chroma_erase, snapshot
from langchain_genmem.backends.base import (
    Capability,
    Erasure,
    Head,
    StoredNode,
    check_replaced,
    forgotten_runs,
)
from langchain_genmem.backends.gate import FolderGate
from langchain_genmem.backends.locks import (
    FolderLock,
    Lease,
    fence_id,
    lease_id,
    thread_lock,
)
from langchain_genmem.core.errors import (
    ConcurrentWriterError,
    EmbeddingDimensionError,
    GenMemError,
    StorageError,
    ValidationError,
)
from langchain_genmem.core.nodes import MemoryNode
from langchain_genmem.core.state import StreamState
from langchain_genmem.core.timeutil import from_epoch, to_epoch

logger = logging.getLogger(__name__)

# Chroma caps a get at 32,766 ids, but a page of vectors that large costs it over a GB of
# transient memory at 100k memories; 1,000 keeps a whole open within 1 GB at no loss of speed.
GET_PAGE = 1_000
_DIM_ERROR = re.compile(r"dimension of (\d+), got (\d+)")
# Chroma's ANN index is never used for ranking (scoring is exact, in numpy), so a light
# graph keeps writes about four times faster. Pass ``configuration`` to change it.
DEFAULT_CONFIGURATION: dict[str, Any] = {"hnsw": {"ef_construction": 16, "max_neighbors": 8}}
# Single-memory commits carried by their node records before the state record is rewritten
# (every read of the head looks them up in one get of this many ids).
CHAIN_MAX = 32
COMMIT_KEY = "commit"
DEFAULT_COLLECTION = "genmem"
"""The Chroma collection every front end uses unless told otherwise."""
# The most characters of ``extra`` entries a single-memory commit carries (more: the state
# record is written), and how deep into ``extra``'s objects its entries are found.
PATCH_MAX = 65_536
PATCH_DEPTH = 3
# on the state record: the revision of a forget whose records may not all be deleted yet
FORGETTING_KEY = "forgetting"
LEASE_KEY = "lease"  # on a server: the token of the write lease a record was written under
FOLDER_WAIT = 5.0  # seconds a second process waits for an embedded folder by default
LEASE_WAIT = 30.0  # seconds a writer waits for a server lease by default
FORMAT_KEY = "node"  # format 2: the node's fields as one JSON object
# Every metadata key of a node record; each write names them all (None deletes a key).
NODE_KEYS = ("persona", "node_count", "last_accessed", "expiration", FORMAT_KEY, COMMIT_KEY)
# The fields packed under FORMAT_KEY, in order (embedding_key only when not the description).
PACKED_FIELDS = ("node_id", "type_count", "type", "depth", "created", "subject", "predicate",
                 "object", "description", "embedding_key", "poignancy", "keywords", "filling")
# Packed after them only when set: a conversation memory's turn fields.
TURN_FIELDS = ("conversation", "speaker")


# Per place (as thread_lock keys it): the backend of this process whose view of the persona is
# current (it made the last write, or read the head back since and found what it knows),
# and the hold of the folder it saw it under. While both still hold, no other writer can
# have changed the persona, so that backend skips reading its head back. WRITING marks a
# write begun and not completed (interrupted, perhaps): every look reads back.
WRITING = (0, None)
_LAST_WRITER: dict[tuple[str, ...], tuple[int, int | None]] = {}
_LAST_WRITER_LOCK = threading.Lock()


class ChromaBackend:
    """Nodes and states of any number of personas in two Chroma collections.

    Args:
        client: any chromadb client (``PersistentClient``, ``EphemeralClient``, ``HttpClient``).
        name: the node collection's name; the state collection is ``<name>-state``.
        configuration: Chroma collection configuration used when the collection is created.
        lock_timeout: seconds a writer waits for another one before
            :class:`~langchain_genmem.core.errors.ConcurrentWriterError`; None: 5 s for a folder
            (another process keeps it until it closes its stream or exits), 30 s for a
            server lease (held for one write).
        lease_ttl: seconds a server lease outlives a writer that died (no heartbeat).
    """

    def __init__(
        self,
        client: Any,
        name: str = DEFAULT_COLLECTION,
        configuration: dict[str, Any] | None = None,
        *,
        lock_timeout: float | None = None,
        lease_ttl: float = 30.0,
    ) -> None:
        self.client = client
        self.name = name
        self.kind, self.where = _client_kind(client)
        if lock_timeout is None:
            lock_timeout = FOLDER_WAIT if self.kind == "folder" else LEASE_WAIT
        self.lock_timeout = lock_timeout
        self.lease_ttl = lease_ttl
        self._folder = FolderLock(self.where, lock_timeout) if self.kind == "folder" else None
        self._gate = None if self._folder is None else FolderGate(self._folder)
        # an embedded folder's erasing process, started at its first forget
        self._eraser = None if self._folder is None else chroma_erase.Eraser(self.where)
        self._leases: Any = None
        self._held = threading.local()  # the lease this thread holds, on a server
        # per persona: the committed state last read or written, and its run of node commits
        self._known: dict[str, StreamState] = {}
        self._chain: dict[str, int] = {}
        self._stamps: dict[str, str] = {}  # per persona: the access stamp this view matches
        # per persona: (committed count, whether a record sits right above it), as the last
        # read_head saw; spares remove_uncommitted its lookup in the write that follows
        self._above: dict[str, tuple[int, bool]] = {}
        # per persona: (rev, node_count) of the state record as this backend last read or wrote it
        self._record: dict[str, tuple[int, int]] = {}
        # per persona: the unfinished forget's revision the last read of the state record saw
        self._pending: dict[str, int | None] = {}
        # per persona: the revision of the last forget this backend finished (a reader's
        # look at the state record may have seen its mark before the finish removed it)
        self._finished: dict[str, int] = {}
        try:
            self.nodes = client.get_or_create_collection(
                name,
                embedding_function=None,
                configuration=configuration or DEFAULT_CONFIGURATION,
                metadata={"genmem": "nodes"},
            )
            self.states = client.get_or_create_collection(
                f"{name}-state", embedding_function=None, metadata={"genmem": "state"}
            )
        except Exception as e:
            msg = f"could not open Chroma collection {name!r}: {e}"
            raise StorageError(msg) from e
        self.batch = int(getattr(client, "get_max_batch_size", lambda: 5000)() or 5000)
        if self._folder is not None:
            self._folder.note_view()  # a write after another process's is refused, not broken

    @property
    def capabilities(self) -> frozenset[Capability]:
        """On an embedded folder: snapshots, read views (see its gate) and compaction."""
        if self.kind != "folder":
            return frozenset()
        return frozenset({"snapshots", "views", "compaction"})

    def read_view(self, persona: str) -> AbstractContextManager[None]:
        """Hold one moment of an embedded folder for the reads of a ``with`` block.

        In a process that does not hold the folder, no other process writes it meanwhile
        (a write in flight is waited for first), so a state read in the block and the
        vectors this process's Chroma index holds are of one moment. Elsewhere: nothing.

        Raises:
            ConcurrentWriterError: another process kept writing longer than ``lock_timeout``.
        """
        return nullcontext() if self._gate is None else self._gate.reading(persona)

    # the write right

    @contextmanager
    def write_lock(self, persona: str) -> Iterator[None]:
        """Hold the right to write ``persona`` for a ``with`` block.

        Threads of this process are serialised. A folder is taken for this process at its
        first write and kept until :meth:`close` or the process ends; another process
        waiting longer than ``lock_timeout`` is refused. On a server each block takes the
        persona's lease, waiting up to ``lock_timeout`` for another holder.

        Args:
            persona: the persona to write.

        Yields:
            Nothing; the right is held until the block exits.

        Raises:
            ConcurrentWriterError: another process holds the right (named in the message).
            StorageError: Chroma failed while the right was taken.
        """
        with thread_lock("chroma", self.kind, self.where, self.name, persona):
            if self._folder is not None:
                self._folder.acquire(persona)
            if self.kind != "server":
                with self._exclusive(persona):
                    yield
                return
            lease = Lease(self._lease_collection(), persona, timeout=self.lock_timeout,
                          ttl=self.lease_ttl)
            with _wrapped(f"could not take the write lease of {persona!r}"):
                lease.acquire()
            self._held.lease = lease
            try:
                yield
            finally:
                self._held.lease = None
                lease.release()

    def close(self) -> None:
        """Give back this process's right to write an embedded folder (reads go on).

        The folder's erasing process ends too (a later forget starts another).
        """
        if self._eraser is not None:
            self._eraser.close()
        if self._folder is not None:
            self._folder.release()

    def _exclusive(self, persona: str) -> AbstractContextManager[None]:
        """Keep other processes' reads of an embedded folder out while a write runs."""
        return nullcontext() if self._gate is None else self._gate.writing(persona)

    def _lease_collection(self) -> Any:
        if self._leases is None:
            with _wrapped("could not open the lease collection"):
                self._leases = self.client.get_or_create_collection(
                    f"{self.name}-lease", embedding_function=None, metadata={"genmem": "lease"}
                )
        return self._leases

    # reading

    def read_head(self, persona: str) -> Head | None:
        """The persona's revision and node count, or None for a persona never written.

        The state record and the run of single-memory commits above it are read back,
        unless this backend made the last write, it completed, and nobody else can have
        written since (:meth:`_own_record`), or it read them back since and found the state
        it knows (:meth:`_saw_current`), so that a server holding its folder reads nothing
        for the retrievals between writes: then nothing is read. A crashed write's
        leftover cannot sit above that head: a write drops this knowledge before it stores
        anything and takes it back only once it completed, so a write that failed or was
        interrupted (even by ``KeyboardInterrupt``) makes the next look read the records
        back, and the leftover is found there.
        """
        own = self._own_record(persona)
        known = self._known.get(persona)
        if own is not None and known is not None:  # the run above it is this backend's too
            return self._own_head(persona, known)
        with self.read_view(persona):  # the state and the run above it: one shared hold
            return self._read_head_back(persona, own)

    def _read_head_back(self, persona: str, own: tuple[int, int] | None) -> Head | None:
        """:meth:`read_head` from the records (the state record too, unless ``own``)."""
        seen = _LAST_WRITER.get(self._place(persona))
        if own is None:
            with self._reading(persona):
                got = self.states.get(ids=[_state_id(persona)], include=["metadatas"])
            if not got["ids"]:
                return None
            meta = got["metadatas"][0]
            own = self._record[persona] = (int(meta["rev"]), int(meta["node_count"]))
            mark = meta.get(FORGETTING_KEY)
            if mark is not None and int(mark) > self._finished.get(persona, 0):
                self._pending[persona] = int(mark)  # not one this backend finished since
            else:
                self._pending[persona] = None
        head = Head(rev=own[0], node_count=own[1])
        chain, above = self._read_chain(persona, head.node_count)
        self._chain[persona] = len(chain)
        if chain:
            head = Head(rev=int(chain[-1]["rev"]), node_count=int(chain[-1]["node_count"]))
        self._above[persona] = (head.node_count, above)
        if not above:
            self._saw_current(persona, head, seen)
        return head

    def _own_head(self, persona: str, known: StreamState) -> Head:
        """The head this backend committed last; nothing sits above it (see :meth:`read_head`)."""
        self._above[persona] = (known.node_count, False)
        return Head(rev=known.rev, node_count=known.node_count)

    def _place(self, persona: str) -> tuple[str, ...]:
        return ("chroma", self.kind, self.where, self.name, persona)

    def _folder_hold(self) -> int | None:
        return None if self._folder is None else self._folder.hold()

    def _own_record(self, persona: str) -> tuple[int, int] | None:
        """(rev, node_count) of the state record when this backend made the last write.

        Only where no other process can write (an embedded folder this process has held
        throughout since, or an in-memory client), and no other backend of this process
        wrote the persona since. None: read it.
        """
        if self.kind == "server" or persona not in self._record:
            return None
        if _LAST_WRITER.get(self._place(persona)) != (id(self), self._folder_hold()):
            return None
        return self._record.get(persona)

    def _wrote(self, persona: str) -> None:
        """Note that this backend made the persona's last write (a commit or a state)."""
        if self.kind != "server":  # a server's head is always read back: nothing to note
            with _LAST_WRITER_LOCK:
                _LAST_WRITER[self._place(persona)] = (id(self), self._folder_hold())

    def _saw_current(self, persona: str, head: Head, seen: tuple[int, int | None] | None) -> None:
        """Take the head just read back as current where nobody else can write it.

        Where the head is the state this backend knows, the next looks read nothing, as after
        this backend's own write. Only while no write of this process began or ended during
        the read (``seen`` is what the place held before it), and none is unfinished.
        """
        known = self._known.get(persona)
        if known is None or (known.rev, known.node_count) != (head.rev, head.node_count):
            return
        hold = self._folder_hold()
        if self.kind == "server" or (self.kind == "folder" and hold is None):
            return
        place = self._place(persona)
        with _LAST_WRITER_LOCK:
            if seen != WRITING and _LAST_WRITER.get(place) == seen:
                _LAST_WRITER[place] = (id(self), hold)

    def _writing(self, persona: str) -> None:
        """Until this write completes, the next look reads the persona back (it may fail)."""
        if self.kind != "server":  # a server's head is always read back
            with _LAST_WRITER_LOCK:
                _LAST_WRITER[self._place(persona)] = WRITING

    def _forget(self, persona: str) -> None:
        """Read the persona back at the next look: a write failed or went elsewhere."""
        with _LAST_WRITER_LOCK:
            _LAST_WRITER.pop(self._place(persona), None)
        self._record.pop(persona, None)

    def read_state(self, persona: str) -> StreamState | None:
        """The persona's committed state, or None for a persona never written."""
        with self._reading(persona):
            got = self.states.get(ids=[_state_id(persona)], include=["documents"])
        if not got["ids"]:
            return None
        state = StreamState.model_validate_json(got["documents"][0])
        self._record[persona] = (state.rev, state.node_count)
        chain, _ = self._read_chain(persona, state.node_count)
        for change in chain:
            state = _apply_change(state, change)
        self._known[persona], self._chain[persona] = state, len(chain)
        return state

    def _read_chain(self, persona: str, node_count: int) -> tuple[list[dict[str, Any]], bool]:
        """The state changes of the run of self-committing node records above ``node_count``.

        Returns:
            The changes, oldest first, and whether a record sits right above the run (a
            crashed write's leftover).
        """
        ids = [_node_id(persona, f"node_{node_count + i}") for i in range(1, CHAIN_MAX + 1)]
        with self._reading(persona):
            got = self.nodes.get(ids=ids, include=["metadatas"])
        by_number = {int(m["node_count"]): m for m in got["metadatas"]}
        chain: list[dict[str, Any]] = []
        for number in range(node_count + 1, node_count + CHAIN_MAX + 1):
            meta = by_number.get(number)
            if meta is None or meta.get(COMMIT_KEY) is None:
                break
            try:
                change = json.loads(meta[COMMIT_KEY])
            except ValueError as e:
                msg = f"persona {persona!r}: node_{number} carries an unreadable commit: {e}"
                raise StorageError(msg) from e
            if change.get("node_count") != number:
                break
            chain.append(change)
        if chain and self.kind == "server":
            tokens = [by_number[node_count + i + 1].get(LEASE_KEY) for i in range(len(chain))]
            chain = chain[: self._finished_writes(persona, tokens)]
        return chain, node_count + len(chain) + 1 in by_number

    def _finished_writes(self, persona: str, tokens: Sequence[str | None]) -> int:
        """How many of a run's records, in order, come from writes that kept their lease.

        A record written under a lease counts once the lease no longer holds its token (its
        writer checked the lease after writing it, then gave it back) and no fence names
        the token (nobody took the lease over from that writer, who deletes it again).
        """
        wanted = [t for t in dict.fromkeys(tokens) if t is not None]
        if not wanted:
            return len(tokens)
        with self._reading(persona):
            got = self._lease_collection().get(
                ids=[lease_id(persona), *(fence_id(persona, t) for t in wanted)],
                include=["metadatas"],
            )
        unfinished = {m.get("fenced") or m.get("token") for m in got["metadatas"]}
        for i, token in enumerate(tokens):
            if token is not None and token in unfinished:
                return i
        return len(tokens)

    def read_nodes(self, persona: str, first: int, last: int) -> list[StoredNode]:
        """The nodes numbered ``first`` .. ``last`` that exist, with their vectors, in order.

        Records of forgotten nodes are left out, also those a forget not finished yet left
        in Chroma (their fields may be erased already: they are never parsed). The forgotten
        numbers are read after the records, so a forget committed in between explains the
        records it deleted.

        Raises:
            StorageError: a number neither stored nor forgotten (a damaged store).
        """
        raw: list[tuple[Any, Any, Any]] = []
        for lo in range(first, last + 1, GET_PAGE):
            hi = min(last, lo + GET_PAGE - 1)
            ids = [_node_id(persona, f"node_{i}") for i in range(lo, hi + 1)]
            with self._reading(persona):
                got = self.nodes.get(ids=ids, include=["embeddings", "metadatas", "documents"])
            raw.extend(zip(got["metadatas"], got["documents"], got["embeddings"], strict=False))
        raw.sort(key=lambda r: int(r[0]["node_count"]))
        live = self._live_numbers(persona, first, last)
        if len(raw) != live.shape[0]:  # a forget not finished yet: its records lost their fields
            alive = set(live.tolist())
            raw = [r for r in raw if int(r[0]["node_count"]) in alive]
        if len(raw) != live.shape[0]:
            found = {int(r[0]["node_count"]) for r in raw}
            missing = [_node_id(persona, f"node_{n}") for n in live.tolist() if n not in found]
            msg = f"persona {persona!r}: committed nodes missing from the store: {missing[:3]}"
            raise StorageError(msg)
        return [StoredNode(_node_from(m, d), np.asarray(v, dtype=np.float32)) for m, d, v in raw]

    def _live_numbers(self, persona: str, first: int, last: int) -> np.ndarray:
        """The numbers ``first`` .. ``last`` the state record does not list as forgotten."""
        with self._reading(persona):
            got = self.states.get(ids=[_state_id(persona)], include=["documents"])
        document = got["documents"][0] if got["ids"] else ""
        ranges = json.loads(document).get("forgotten", []) if '"forgotten"' in document else []
        held = StreamState.model_construct(node_count=last, forgotten=[tuple(r) for r in ranges])
        return held.live_numbers(first, last)

    def personas(self) -> list[str]:
        """Every persona with a committed state, sorted."""
        with self._reading("*"):
            got = self.states.get(include=["metadatas"])
        return sorted(m["persona"] for m in got["metadatas"])

    @contextmanager
    def _reading(self, persona: str) -> Iterator[None]:
        """One Chroma read (waiting for another process's write in flight), errors said plainly.

        Raises:
            ConcurrentWriterError: the read failed in a process whose view of an embedded
                folder misses another process's write (it is named), or that process kept
                writing longer than ``lock_timeout``.
            StorageError: Chroma failed otherwise.
        """
        try:
            with self.read_view(persona):
                yield
        except GenMemError:
            raise
        except Exception as e:
            if self._folder is not None:
                moved, record = self._folder.written_since_view()
                if moved:
                    raise self._folder.stale(persona, record, reading=True) from e
            msg = f"could not read the memories of {persona!r} from Chroma: {e}"
            raise StorageError(msg) from e

    # writing

    def remove_uncommitted(self, persona: str, node_count: int) -> int:
        """Delete the persona's node records numbered above ``node_count``.

        Leftovers always start at ``node_{node_count+1}``: a write stores its pages in
        ascending order from there, and leftovers are deleted highest first (here and when
        a failed write undoes itself). So one lookup of that id tells whether there are
        any (about a millisecond; none when the ``read_head`` of this write, inside the same
        write right, already knows that id absent: it read it, or this backend's own last
        write completed); only then are they all looked up and deleted.

        A forget interrupted after its commit point, seen by that ``read_head``, is finished
        first (its records are not counted here).

        Args:
            persona: the persona.
            node_count: the committed node count.

        Returns:
            How many records were removed.
        """
        pending = self._pending.pop(persona, None)
        if pending is not None:  # a forget was interrupted after its commit point
            self._finish_interrupted(persona, int(pending))
        where = {"$and": [{"persona": persona}, {"node_count": {"$gt": node_count}}]}
        if self._above.pop(persona, None) == (node_count, False):
            return 0  # the read_head of this write found nothing above the committed count
        with _wrapped(f"could not look for uncommitted records of {persona!r}"):
            probe = self.nodes.get(ids=[_node_id(persona, f"node_{node_count + 1}")], include=[])
            if not probe["ids"]:
                return 0
            found = self.nodes.get(where=where, include=["metadatas"])
            ordered = [i for _, i in sorted(
                zip((m["node_count"] for m in found["metadatas"]), found["ids"], strict=True),
                reverse=True)]
            self._delete_highest_first(ordered)
        return len(ordered)

    def commit(
        self,
        persona: str,
        nodes: Sequence[StoredNode],
        state: StreamState,
        *,
        strength_changes: Mapping[str, Mapping[str, int]] | None = None,
    ) -> None:
        """Store new nodes page by page, then the state that makes them visible.

        The records' ids are free: :meth:`remove_uncommitted` ran in the same write right, so
        the keys a node has no value for are left out rather than named with None (Chroma
        spends a delete on each, a sixth of a bulk write).

        One new node that follows the state this backend last read or wrote is committed by
        its own record (one Chroma write; see the module docstring), up to
        :data:`CHAIN_MAX` in a row; it carries ``strength_changes`` when given (else the
        strengths that differ from the committed state's, found by comparing every one).
        On any failure the records already written are deleted again and nothing is visible.

        Raises:
            EmbeddingDimensionError: a vector does not fit the collection.
            StorageError: Chroma failed; nothing was committed.
        """
        change = self._single_change(persona, nodes, state, strength_changes)
        lease = getattr(self._held, "lease", None)
        token = None if lease is None else lease.token
        written: list[str] = []
        self._writing(persona)
        try:
            if change is not None:
                self._check_lease(persona)
            for chunk in _chunks(nodes, self.batch):
                ids = [_node_id(persona, s.node.node_id) for s in chunk]
                metas = [_fresh_meta(persona, s.node) for s in chunk]
                if token is not None:
                    for meta in metas:
                        meta[LEASE_KEY] = token
                if change is not None:
                    metas[0][COMMIT_KEY] = json.dumps(change, ensure_ascii=False)
                self.nodes.upsert(
                    ids=ids,
                    embeddings=np.vstack([s.vector for s in chunk]),
                    metadatas=metas,
                )
                written.extend(ids)
            if change is None:
                self.write_state(persona, state)
            else:
                self._check_lease(persona)  # stalled past the lease: undo, as write_state does
                self._known[persona] = state
                self._chain[persona] = self._chain.get(persona, 0) + 1
                self._wrote(persona)
        except GenMemError:
            self._forget(persona)
            self._undo(written, token)
            raise
        except Exception as e:
            self._forget(persona)
            self._undo(written, token)
            raise _storage_error(e) from e

    def _single_change(
        self,
        persona: str,
        nodes: Sequence[StoredNode],
        state: StreamState,
        strength_changes: Mapping[str, Mapping[str, int]] | None = None,
    ) -> dict[str, Any] | None:
        """The change a one-node commit carries, or None when the state record is needed."""
        known = self._known.get(persona)
        if (
            len(nodes) != 1
            or known is None
            or known.rev != state.rev - 1
            or known.node_count != state.node_count - 1
            or nodes[0].node.node_count != state.node_count
            or self._chain.get(persona, CHAIN_MAX) >= CHAIN_MAX - 1
            or known.forgotten != state.forgotten
            or known.idempotency != state.idempotency
            or known.superseded != state.superseded
            or known.rekeyed != state.rekeyed
        ):
            return None
        if any(kind not in state.kw_strength for kind in known.kw_strength):
            return None
        patch = extra_patch(known.extra, state.extra)
        if patch and len(json.dumps(patch, ensure_ascii=False)) > PATCH_MAX:
            return None
        change = state.model_dump(
            mode="json",
            exclude={"kw_strength", "extra", "forgotten", "idempotency", "superseded",
                     "rekeyed"},
        )
        if patch:
            change["extra"] = patch
        if strength_changes is not None:  # the writer knows them: no comparison of every one
            change["kw_strength"] = {k: dict(c) for k, c in strength_changes.items() if c}
            return change
        strengths: dict[str, dict[str, int]] = {}
        for kind, counts in state.kw_strength.items():
            before = known.kw_strength.get(kind, {})
            if any(kw not in counts for kw in before):
                return None  # a strength was removed: only the state record says that
            changed = {kw: n for kw, n in counts.items() if before.get(kw) != n}
            if changed:
                strengths[kind] = changed
        change["kw_strength"] = strengths
        return change

    def write_state(self, persona: str, state: StreamState) -> None:
        """Store a new state with no new nodes.

        Raises:
            ConcurrentWriterError: this write's server lease expired or was taken over
                (the writer stalled longer than ``lease_ttl``); nothing is stored.
        """
        self._store_state(persona, state, f"could not store the state of {persona!r}")
        self._wrote(persona)

    def _store_state(
        self, persona: str, state: StreamState, failing: str, **meta: int
    ) -> None:
        """Write the state record (with ``meta`` keys besides its own); the commit point."""
        self._check_lease(persona)
        self._forget(persona)  # until the write is known to have happened
        with _wrapped(failing):
            self.states.upsert(
                ids=[_state_id(persona)],
                embeddings=np.ones((1, 1), dtype=np.float32),
                metadatas=[{"persona": persona, "rev": state.rev, "node_count": state.node_count,
                            **meta}],
                documents=[state.model_dump_json()],
            )
        self._known[persona], self._chain[persona] = state, 0
        self._record[persona] = (state.rev, state.node_count)

    def forget(
        self,
        persona: str,
        node_numbers: Sequence[int],
        state: StreamState,
        replaced: Sequence[StoredNode] = (),
        *,
        strength_changes: Mapping[str, Mapping[str, int]] | None = None,
    ) -> Erasure | None:
        """Delete the snapshot, re-key ``replaced``, commit ``state``, delete the records.

        The state record, written with ``forgetting`` set to its revision, is the commit
        point (see the module docstring): an interruption before it leaves every memory
        (at most some kept turns already re-keyed: their text then quotes a turn less,
        nothing more), one after it is finished by the next write. A reader meanwhile gets
        the new state and no forgotten node from :meth:`read_nodes`. A re-keyed record gets
        its new packed fields and vector (an update: its access time stays).

        ``strength_changes`` is not needed: the state record holds every strength.

        Returns:
            Whether an embedded folder's records were erased from its files (with the
            reason when not); None on a Chroma server, whose files are its own.

        Raises:
            ValidationError: ``state`` does not list exactly these numbers as forgotten
                (and those of ``replaced`` as re-keyed).
            ConcurrentWriterError: this write's server lease was lost; nothing was forgotten.
            StorageError: Chroma failed: before the commit point nothing was forgotten;
                after it (the message says so) the next write deletes the records.
        """
        forgotten_runs(persona, node_numbers, state)
        check_replaced(persona, replaced, state)
        failing = f"could not forget memories of {persona!r}; nothing was forgotten"
        with self._snapshot_lock(persona):  # no snapshot of the old state saved in between
            with _wrapped(failing):
                self._remove_snapshot(persona)  # it holds the nodes: gone before the commit
                self._rekey(persona, replaced)
            self._store_state(persona, state, failing, **{FORGETTING_KEY: state.rev})
        with _wrapped(f"persona {persona!r}: the forget is committed, but deleting or "
                      "erasing its records failed (the next write of the persona finishes "
                      "it)"):
            erasure = self._finish_forget(persona, state, state.rev)
        self._wrote(persona)
        return erasure

    def _rekey(self, persona: str, replaced: Sequence[StoredNode]) -> None:
        """Give kept records their new packed fields (embedding_key) and vectors."""
        self._check_lease(persona)
        for chunk in _chunks(replaced, self.batch):
            self.nodes.update(
                ids=[_node_id(persona, s.node.node_id) for s in chunk],
                embeddings=np.vstack([np.asarray(s.vector, dtype=np.float32) for s in chunk]),
                metadatas=[{FORMAT_KEY: _meta_of(persona, s.node)[FORMAT_KEY]} for s in chunk],
            )

    def _finish_forget(self, persona: str, state: StreamState, since: int) -> Erasure | None:
        """Delete the records of ranges forgotten at revision ``since`` or later, then the mark.

        In an embedded folder every copy of them is erased from its files as well
        (:mod:`~langchain_genmem.backends.chroma_erase`: their rows are overwritten before
        Chroma deletes them, what Chroma freed is zeroed after) before the mark goes, so an
        interrupted erasure is finished with the forget.
        """
        numbers = [n for lo, hi, rev in state.forgotten if rev >= since
                   for n in range(lo, hi + 1)]
        ids = [_node_id(persona, f"node_{n}") for n in numbers]
        rekeyed = [_node_id(persona, f"node_{n}") for n in state.rekeyed_since(since - 1)]
        erasure = self._erased_delete(persona, ids, state.dim, rekeyed)
        self._remove_snapshot(persona)
        self.states.update(ids=[_state_id(persona)], metadatas=[{FORGETTING_KEY: None}])
        self._finished[persona] = max(self._finished.get(persona, 0), state.rev)
        self._pending[persona] = None
        return erasure

    def _erased_delete(
        self, persona: str, ids: Sequence[str], dim: int | None, rekeyed: Sequence[str],
    ) -> Erasure | None:
        """Delete node records page by page, erasing them where it applies.

        In an embedded folder laid out as expected they are erased from its files too
        (their rows overwritten before the deletes, what Chroma freed zeroed after).

        Returns:
            Whether they were erased (an embedded folder's records), with the reason when
            not; None for a store whose files are not this process's (a Chroma server).
        """
        eraser = self._eraser if ids and dim else None
        state = (self.states, _state_id(persona))
        present = None
        if eraser is not None:
            present = chroma_erase.prepare(eraser, self.nodes, ids, int(dim or 0), state,
                                           rekeyed)
        refused = None if eraser is None else eraser.refused
        if present is None:  # nothing to erase, or another layout (a warning was logged)
            eraser = None
        else:
            for chunk in _chunks(present, self.batch):
                chroma_erase.blank(self.nodes, chunk, int(dim or 0), existing=True)
        for chunk in _chunks(ids, self.batch):
            self.nodes.delete(ids=list(chunk))
        if eraser is not None:
            chroma_erase.finish(eraser, self.nodes, ids, int(dim or 0), state, rekeyed)
            refused = eraser.refused
        if self._eraser is None or not ids:
            return None
        return Erasure(erased=refused is None, reason=refused)

    def _finish_interrupted(self, persona: str, since: int) -> None:
        """Finish a forget of revision ``since`` that an interrupted writer committed."""
        with _wrapped(f"could not finish an interrupted forget of {persona!r}"):
            state = self.read_state(persona)
            if state is not None:
                self._finish_forget(persona, state, since)
        logger.warning("persona %r: finished an interrupted forget (revision %d)",
                       persona, since)

    def _remove_snapshot(self, persona: str) -> None:
        """Delete the persona's snapshot file (it may hold forgotten nodes), if any."""
        if self.kind == "folder":
            with self._snapshot_lock(persona):
                snapshot.remove(snapshot.path_of(self.where, self.name, persona))

    def _snapshot_lock(self, persona: str) -> AbstractContextManager[Any]:
        """Serialises, in this process, a snapshot's check and write with its removal."""
        return thread_lock("chroma-snapshot", self.where, self.name, persona)

    def _check_lease(self, persona: str) -> None:
        """Refuse to commit when this write's server lease was lost."""
        lease = getattr(self._held, "lease", None)
        if lease is not None and not lease.still_held():
            msg = (
                f"persona {persona!r}: the write lease was lost before the write was "
                f"committed (this writer stalled over {self.lease_ttl:g} s and another may "
                "have taken over); nothing was committed, retry the write"
            )
            raise ConcurrentWriterError(msg, persona=persona)

    def write_access(self, persona: str, times: Mapping[str, float]) -> None:
        """Store last-access times (epoch seconds) of existing nodes.

        A new random access stamp goes on the state record afterwards, so a snapshot taken
        before these times is known to be stale. An embedded folder is taken for this
        process first, as for any write.

        Raises:
            ConcurrentWriterError: another process holds the embedded folder.
        """
        items = list(times.items())
        if not items:
            return
        if self._folder is not None:
            self._folder.acquire(persona)  # access times are a write of the folder too
        with self._exclusive(persona):
            self._store_access(persona, items)

    def _store_access(self, persona: str, items: Sequence[tuple[str, float]]) -> None:
        """Store the times later than the stored ones, then a new access stamp (a folder)."""
        for chunk in _chunks(items, self.batch):
            ids = [_node_id(persona, node_id) for node_id, _ in chunk]
            later = self._later_than_stored(ids, [float(t) for _, t in chunk])
            if later:
                self.nodes.update(
                    ids=list(later), metadatas=[{"last_accessed": t} for t in later.values()]
                )
        if self.kind == "folder":
            stamp = uuid.uuid4().hex
            self.states.update(ids=[_state_id(persona)], metadatas=[{"access_stamp": stamp}])
            if self._stamps.get(persona) is not None:
                self._stamps[persona] = stamp

    def _later_than_stored(self, ids: list[str], times: list[float]) -> dict[str, float]:
        """The ids whose new access time is later than the stored one.

        Another process's later access stays. Chroma has no conditional update, so this
        reads the stored times first.
        """
        got = self.nodes.get(ids=ids, include=["metadatas"])
        pairs = zip(got["ids"], got["metadatas"], strict=True)
        stored = {i: (m or {}).get("last_accessed") for i, m in pairs}
        return {
            i: t for i, t in zip(ids, times, strict=True)
            if i in stored and ((held := stored[i]) is None or t > float(held))
        }

    # snapshots (embedded folders only)

    def snapshot_key(self, persona: str) -> snapshot.Key | None:
        """What a snapshot of the persona must match now (None: no snapshots here)."""
        if self.kind != "folder":
            return None
        with self._reading(persona):
            got = self.states.get(ids=[_state_id(persona)], include=["metadatas"])
        if not got["ids"]:
            return None
        stamp = str(got["metadatas"][0].get("access_stamp") or "")
        state = self.read_state(persona)
        if state is None:
            return None
        return snapshot.Key(self.name, persona, state.rev, state.node_count,
                            snapshot.state_hash(state.model_dump_json()), stamp)

    def read_snapshot(
        self, persona: str, growth: float = 1.0
    ) -> tuple[StreamState, snapshot.Content] | None:
        """The committed state and the cache's content from a matching snapshot, or None.

        Args:
            persona: the persona.
            growth: row arrays come back with room for ``growth`` times the node count.

        Returns:
            ``(state, content)`` when a snapshot matches the store exactly (see
            :mod:`~langchain_genmem.backends.snapshot`); None means: open from Chroma.
        """
        key = self.snapshot_key(persona)
        state = self._known.get(persona)
        if key is None or state is None or state.live_count == 0:
            return None
        spare = int(key.node_count * max(0.0, growth - 1.0))
        path = snapshot.path_of(self.where, self.name, persona)
        got = snapshot.read(path, key, spare, rows=state.live_count)
        if got is None or not _numbered_as(got, state):
            return None
        self._stamps[persona] = key.access_stamp
        return state, got

    def begin_load(self, persona: str) -> snapshot.Key | None:
        """The key to write a snapshot under once a full load that starts now is done."""
        key = self.snapshot_key(persona)
        self._stamps[persona] = "" if key is None else key.access_stamp
        return key

    def write_snapshot(
        self, persona: str, key: snapshot.Key | None, content: snapshot.Content
    ) -> bool:
        """Save a snapshot of what a stream holds, if it is still the store's.

        Args:
            persona: the persona.
            key: the key the caller's view was read at (:meth:`begin_load`), or None to
                take the store's key now (after this process's own writes and flushes); a
                snapshot already taken at that key is kept as it is.
            content: the stream cache's content (``meta["n"]`` nodes; once nodes were
                forgotten, a :data:`~langchain_genmem.backends.snapshot.NUMBERS` row array
                must name the nodes of its rows, each existing one once).

        Returns:
            True when a snapshot was written.
        """
        with self.read_view(persona), self._snapshot_lock(persona):  # no forget meanwhile
            now = self.snapshot_key(persona)
            state = self._known.get(persona)
            if now is None or state is None or not _numbered_as(content, state):
                return False
            path = snapshot.path_of(self.where, self.name, persona)
            if key is None:  # only times this process wrote or loaded: nobody else's
                if self._stamps.get(persona) != now.access_stamp or snapshot.matches(path, now):
                    return False
                key = now
            elif key != now:
                return False
            try:
                snapshot.write(path, key, content, rows=state.live_count)
            except OSError as e:
                snapshot.logger.warning("could not write the snapshot of %r: %s", persona, e)
                return False
            return True

    def drop(self, persona: str) -> None:
        """Delete everything of a persona: its node records, state record and snapshot file.

        A write: takes an embedded folder. Keyword strengths live in the state record and
        access times on the node records, so they go with them. In an embedded folder every
        copy of them is erased from its files as well, as by :meth:`forget`.
        """
        if self._folder is not None:
            self._folder.acquire(persona)
        with self._exclusive(persona), _wrapped(f"could not delete persona {persona!r}"):
            self._remove_snapshot(persona)
            if self._eraser is None:
                self.nodes.delete(where={"persona": persona})
                self.states.delete(ids=[_state_id(persona)])
            else:
                self._drop_erased(persona, self._eraser)
        self._forget(persona)
        for held in (self._known, self._chain, self._pending, self._above, self._stamps,
                     self._finished):
            held.pop(persona, None)

    def _drop_erased(self, persona: str, eraser: chroma_erase.Eraser) -> None:
        """Delete the persona's records, erasing them from the folder's files.

        Every version of its state record goes too.
        """
        ids = self.nodes.get(where={"persona": persona}, include=[])["ids"]
        got = self.nodes.get(ids=ids[:1], include=["embeddings"])["embeddings"] if ids else []
        dim = len(got[0]) if len(got) else 1
        state = (self.states, _state_id(persona))
        present = chroma_erase.prepare(eraser, self.nodes, ids, dim, state)
        erase = (present is not None
                 and chroma_erase.prepare(eraser, self.states, [state[1]], 1, state) is not None)
        for chunk in _chunks((present or []) if erase else [], self.batch):
            chroma_erase.blank(self.nodes, chunk, dim, existing=True)
        for chunk in _chunks(ids, self.batch):
            self.nodes.delete(ids=list(chunk))
        self.states.delete(ids=[state[1]])
        if erase:
            chroma_erase.finish(eraser, self.nodes, ids, dim, state)

    def compact(self) -> dict[str, Any] | None:
        """Rebuild an embedded folder's database so that nothing deleted stays in it.

        A forget erases what it forgets in work that grows with what it forgets
        (:mod:`~langchain_genmem.backends.chroma_erase`); this is the whole-file work it
        leaves: ``VACUUM`` of ``chroma.sqlite3`` (with ``secure_delete`` on, after merging
        Chroma's full-text index), which also clears copies that Chroma's own writes moved
        into the free space of live pages, and returns the free pages to the file system,
        and the index files' unused room zeroed. It takes as long as rewriting the database
        (seconds per 100,000 memories) and needs that much free disk; run it after large
        forgets, before a backup or a handover of the folder, or on a schedule. A write:
        takes the folder, and other processes' reads wait for it.

        Returns:
            What it did: ``bytes_before``/``bytes_after`` (the database file),
            ``free_pages_before``/``free_pages_after``, ``full_text_merged`` and
            ``index_bytes_zeroed``; None when the installed Chroma is not a version the
            erasure was tested with or the folder is laid out otherwise (a warning is
            logged, nothing is changed). Only an embedded folder has the
            ``"compaction"`` capability.

        Raises:
            ConcurrentWriterError: another process holds the folder.
            StorageError: SQLite failed (nothing is lost: a failed ``VACUUM`` changes
                nothing).
        """
        if self._folder is None or self._eraser is None:
            return None
        self._folder.acquire()
        with self._exclusive("*"), _wrapped("could not compact the Chroma folder"):
            return chroma_erase.compact(self._eraser)

    def _undo(self, ids: list[str], token: str | None = None) -> None:
        """Delete this write's records again (best effort: the next write removes the rest).

        Under a server lease only the records still carrying this write's token go: a
        writer that took the lease over may have written its own under the same ids.
        """
        try:
            self._delete_highest_first(ids[::-1], token)
        except Exception:  # noqa: BLE001 - best effort: the next write removes what is left
            return

    def _delete_highest_first(self, ids: Sequence[str], token: str | None = None) -> None:
        """Delete records, given highest node number first, in pages.

        A crash in between leaves a run starting right above the committed count (see
        :meth:`remove_uncommitted`).
        """
        for chunk in _chunks(ids, self.batch):
            if token is None:
                self.nodes.delete(ids=list(chunk))
            else:
                self.nodes.delete(ids=list(chunk), where={LEASE_KEY: token})


def persistent_client(path: str | Path) -> Any:
    """An embedded Chroma client on a folder, created (with its parents) when missing.

    Args:
        path: the folder that holds, or will hold, the store.

    Returns:
        A ``chromadb.PersistentClient`` with Chroma's default settings (Chroma refuses a
        second client of one folder with other settings, so ours must match the user's).

    Raises:
        ValidationError: the path is a file, or the folder cannot be created there.
        StorageError: Chroma cannot open the folder (e.g. it holds a damaged store).
    """
    import chromadb

    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        msg = (
            f"path: {folder} is a file; give a folder for the embedded Chroma store "
            "(a missing one is created)"
        )
        raise ValidationError(msg, field="path")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        msg = (
            f"path: cannot create the folder {folder} ({e.strerror or e}); give a folder "
            "that can be written"
        )
        raise ValidationError(msg, field="path") from e
    try:
        return chromadb.PersistentClient(path=str(folder))
    except Exception as e:  # noqa: BLE001 - chromadb raises many kinds
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0]
        msg = f"path: Chroma cannot open the store at {folder} ({reason})"
        raise StorageError(msg) from e


def _client_kind(client: Any) -> tuple[str, str]:
    """``("server", url)``, ``("folder", path)`` or ``("memory", "")`` for a chromadb client."""
    try:
        settings = client.get_settings()
    except Exception:  # noqa: BLE001 - a client without settings: treat as in-process
        return "memory", ""
    if "fastapi" in str(getattr(settings, "chroma_api_impl", "")).lower():
        host = getattr(settings, "chroma_server_host", "") or ""
        port = getattr(settings, "chroma_server_http_port", "") or ""
        return "server", f"{host}:{port}"
    if getattr(settings, "is_persistent", False) and getattr(settings, "persist_directory", ""):
        return "folder", str(Path(settings.persist_directory).resolve())
    return "memory", ""


@contextmanager
def _wrapped(what: str) -> Iterator[None]:
    try:
        yield
    except GenMemError:
        raise
    except Exception as e:
        msg = f"{what}: {e}"
        raise StorageError(msg) from e


def _node_id(persona: str, node_id: str) -> str:
    return f"{persona}::{node_id}"


def _state_id(persona: str) -> str:
    return f"{persona}::state"


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _storage_error(e: Exception) -> Exception:
    found = _DIM_ERROR.search(str(e))
    if found:
        return EmbeddingDimensionError(int(found.group(1)), int(found.group(2)))
    return StorageError(f"Chroma refused the write; nothing was committed: {e}")


def _meta_of(persona: str, node: MemoryNode) -> dict[str, Any]:
    """The metadata of a node's record, in record format 2 (see the module docstring)."""
    packed: dict[str, Any] = {
        "node_id": node.node_id,
        "type_count": node.type_count,
        "type": node.type,
        "depth": node.depth,
        "created": to_epoch(node.created),
        "subject": node.subject,
        "predicate": node.predicate,
        "object": node.object,
        "description": node.description,
        "poignancy": float(node.poignancy),
        "keywords": node.keywords,
        "filling": node.filling,
    }
    if node.embedding_key != node.description:
        packed["embedding_key"] = node.embedding_key
    for name in TURN_FIELDS:
        if getattr(node, name, None) is not None:
            packed[name] = getattr(node, name)
    accessed = to_epoch(node.last_accessed)
    return {
        "persona": persona,
        "node_count": node.node_count,
        "last_accessed": None if accessed == packed["created"] else accessed,
        "expiration": None if node.expiration is None else to_epoch(node.expiration),
        FORMAT_KEY: json.dumps(packed, ensure_ascii=False, separators=(",", ":")),
        COMMIT_KEY: None,  # set by a single-memory commit; None removes an older one
    }


def _fresh_meta(persona: str, node: MemoryNode) -> dict[str, Any]:
    """:func:`_meta_of` without its None values, for a record id known to be free."""
    return {k: v for k, v in _meta_of(persona, node).items() if v is not None}


def _numbered_as(content: snapshot.Content, state: StreamState) -> bool:
    """Whether a snapshot's rows are exactly the state's existing nodes, in order.

    Before anything was forgotten, ``meta["n"]`` rows are ``node_1`` .. ``node_n``; after,
    the :data:`~langchain_genmem.backends.snapshot.NUMBERS` row array must list them.
    """
    if int(content.meta.get("n", -1)) != state.live_count:
        return False
    if not state.forgotten:
        return True
    numbers = content.rows.get(snapshot.NUMBERS)
    if numbers is None:
        return False
    return bool(np.array_equal(numbers[: state.live_count],
                               state.live_numbers(1, state.node_count)))


def _apply_change(state: StreamState, change: Mapping[str, Any]) -> StreamState:
    """The state after a single-memory commit carried by its node record."""
    strengths = {kind: dict(counts) for kind, counts in state.kw_strength.items()}
    for kind, counts in change.get("kw_strength", {}).items():
        strengths.setdefault(kind, {}).update(counts)
    fields = {k: v for k, v in change.items() if k not in ("kw_strength", "extra")}
    extra = patched(state.extra, change.get("extra", ()))
    return StreamState.model_validate({**state.model_dump(exclude={"extra", "kw_strength"}),
                                       **fields, "kw_strength": strengths, "extra": extra})


_ABSENT = object()


def extra_patch(before: Mapping[str, Any], after: Mapping[str, Any],
                depth: int = PATCH_DEPTH) -> list[list[Any]]:
    """The entries of ``extra`` a commit changes: ``[path, value]`` set, ``[path]`` removed.

    Objects are compared by identity first (a writer replaces what it changes and shares
    the rest), so finding the few changed key records of a large store is cheap.

    Args:
        before: the committed ``extra``.
        after: the new one.
        depth: how many levels of objects to look into.

    Returns:
        The entries, in an order :func:`patched` applies.
    """
    out: list[list[Any]] = []
    for key, value in after.items():
        old = before.get(key, _ABSENT)
        if old is value:
            continue
        if depth > 1 and isinstance(old, dict) and isinstance(value, dict):
            out += [[[key, *path], *rest] for path, *rest in extra_patch(old, value, depth - 1)]
        elif old is _ABSENT or old != value:
            out.append([[key], value])
    out += [[[key]] for key in before if key not in after]
    return out


def patched(extra: Mapping[str, Any], patch: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """``extra`` with a commit's entries (:func:`extra_patch`) set and removed."""
    out = dict(extra)
    copied: set[tuple[str, ...]] = set()
    for path, *value in patch:
        node = out
        for i, key in enumerate(path[:-1]):
            where = tuple(path[: i + 1])
            if where not in copied:
                node[key] = dict(node.get(key) or {})
                copied.add(where)
            node = node[key]
        if value:
            node[path[-1]] = value[0]
        else:
            node.pop(path[-1], None)
    return out


def _node_from(meta: Mapping[str, Any], document: str | None) -> MemoryNode:
    """The node of a stored record, of either record format.

    Args:
        meta: the record's metadata.
        document: the record's Chroma document (the description in format 1; None or
            anything in format 2, which keeps the description in ``meta``).

    Returns:
        The node, exactly as it was written.
    """
    packed = meta.get(FORMAT_KEY)
    fields = _format_1_fields(meta, document) if packed is None else json.loads(packed)
    expiration, accessed = meta.get("expiration"), meta.get("last_accessed")
    return MemoryNode.model_construct(
        node_id=fields["node_id"],
        node_count=int(meta["node_count"]),
        type_count=int(fields["type_count"]),
        type=fields["type"],
        depth=int(fields["depth"]),
        created=from_epoch(fields["created"]),
        expiration=None if expiration is None else from_epoch(expiration),
        last_accessed=from_epoch(accessed if accessed is not None else fields["created"]),
        subject=fields["subject"],
        predicate=fields["predicate"],
        object=fields["object"],
        description=fields["description"],
        embedding_key=fields.get("embedding_key", fields["description"]),
        poignancy=float(fields["poignancy"]),
        keywords=fields["keywords"],
        filling=fields["filling"],
        **{name: fields.get(name) for name in TURN_FIELDS},
    )


def _format_1_fields(meta: Mapping[str, Any], document: str | None) -> dict[str, Any]:
    """The packed fields of a format-1 record: one key per field, the description as document."""
    fields = {name: meta[name] for name in PACKED_FIELDS if name not in ("description",
                                                                         "keywords", "filling")}
    fields["description"] = document
    fields["keywords"] = json.loads(meta["keywords"])
    fields["filling"] = json.loads(meta["filling"])
    return fields
