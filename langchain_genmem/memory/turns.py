"""Conversation memories: the text a turn or a chat is embedded with.

A turn on its own ("Yes, it was amazing!", "我也是") often says nothing of what it is about;
that is in the turn before it. So a memory that is a turn of a conversation (its
``conversation`` is set) and has no ``embedding_key`` of its own is embedded with up to
``context_turns`` previous turns of the same conversation and the speakers' names, one turn a
line, this turn last::

    林晓: 静静！睡了没
    陈静: 没呢，在看书
    陈静: 我也是

Its description stays the turn as said. A chat memory (type ``chat``) without an
``embedding_key`` is embedded with its utterances (``filling``) after its description, so what
was said in it is found. Both texts are bounded: each earlier turn keeps its last
:data:`PREVIOUS_TURN_CHARS` characters, a chat its first :data:`CHAT_KEY_CHARS`, so the turn
itself stays inside the embedding model's window.

:class:`TurnLog` keeps, per conversation, the turns a stream holds in ``created`` order (then
node order), caught up row by row from the stream's cache: an add reads the previous turns
from it, never the whole persona.

Forgetting a turn: a kept later turn whose embedded text quotes it (holds its line) is given
the text this rule makes from the turns that remain (:meth:`TurnLog.rekeyed`), and a new
vector, in the forget's write (see :mod:`~langchain_genmem.memory.forgetting`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from langchain_genmem.core.nodes import MemoryNode

PREVIOUS_TURN_CHARS = 300
"""The most characters of an earlier turn an embedded text keeps (its end, nearest this turn)."""

CHAT_KEY_CHARS = 1500
"""The most characters of a chat's embedded text (description, then utterances)."""

Turn = tuple[str | None, str]  # (speaker, what was said)


class NodeRows(Protocol):
    """What a :class:`TurnLog` reads: the stream's cache."""

    alive: Any  # per row, False once its memory was forgotten

    @property
    def n(self) -> int:
        """How many rows (nodes) are held."""

    @property
    def nodes(self) -> Sequence[MemoryNode]:
        """The MemoryNode of each row."""


def is_turn(node: MemoryNode) -> bool:
    """Whether a memory is a turn of a conversation, embedded with the turns before it.

    A chat memory (type ``chat``), which holds its utterances, is not.
    """
    return node.conversation is not None and node.type != "chat"


def said(speaker: str | None, text: str) -> str:
    """One line of an embedded conversation: ``"speaker: text"``, or the text alone."""
    return text if not speaker else f"{speaker}: {text}"


def turn_text(previous: Sequence[Turn], speaker: str | None, text: str, limit: int) -> str:
    """The text a turn is embedded with: earlier turns, then this one, each with its speaker.

    Args:
        previous: earlier turns of the conversation, oldest first.
        speaker: who said this turn, or None.
        text: this turn as said.
        limit: the most characters of the result (the stored text's bound); earlier turns
            are dropped, oldest first, to fit.

    Returns:
        The lines joined by newlines; ``text`` alone when there is no earlier turn and no
        speaker.
    """
    own = said(speaker, text)
    lines: list[str] = []
    used = len(own)
    for who, earlier in reversed(previous):
        line = said(who, _tail(earlier, PREVIOUS_TURN_CHARS))
        if used + len(line) + 1 > limit:
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join([*reversed(lines), own]) if used <= limit else text


def chat_text(description: str, filling: Any, limit: int) -> str:
    """The text a chat is embedded with: its description, then ``speaker: utterance`` lines.

    Args:
        description: the chat's description.
        filling: its ``[[speaker, utterance], ...]`` (anything else adds nothing).
        limit: the most characters of the result (at most :data:`CHAT_KEY_CHARS` are used).

    Returns:
        The description alone when there are no utterances.
    """
    if not isinstance(filling, list) or not filling:
        return description
    room = min(limit, CHAT_KEY_CHARS)
    text = "\n".join([description, *(said(who, what) for who, what in filling)])
    return text if len(text) <= room else text[:room].rstrip() or description


def quotes(key: str, speaker: str | None, text: str, earlier: Sequence[Turn]) -> bool:
    """Whether a turn's embedded text holds the line of any of ``earlier`` (as turn_text wrote).

    Args:
        key: the turn's stored embedding_key.
        speaker: who said the turn.
        text: the turn as said.
        earlier: earlier turns of its conversation.

    Returns:
        False for a text that is not this turn's line after earlier ones.
    """
    own = said(speaker, text)
    if len(key) <= len(own) or not key.endswith("\n" + own):
        return False
    context = "\n" + key[: len(key) - len(own)]
    return any(f"\n{said(who, _tail(what, PREVIOUS_TURN_CHARS))}\n" in context
               for who, what in earlier)


def _tail(text: str, chars: int) -> str:
    return text if len(text) <= chars else "…" + text[len(text) - chars + 1:]


class TurnLog:
    """The turns of each conversation a stream holds, in ``created`` order then node order.

    Built on first use from the cache's rows, then caught up with the rows added since
    (:meth:`sync`), like the lexical index.
    """

    def __init__(self) -> None:
        self._rows = 0
        self._turns: dict[str, list[tuple[datetime, int, str | None, str]]] = {}

    def sync(self, cache: NodeRows) -> None:
        """Take the turns of rows the cache gained since the last call.

        Args:
            cache: the stream's cache.
        """
        if cache.n < self._rows:  # another stream's cache, or a reset one: start afresh
            self._rows, self._turns = 0, {}
        nodes, alive = cache.nodes, cache.alive
        for row in range(self._rows, cache.n):
            if not alive[row]:
                continue
            node = nodes[row]
            if is_turn(node):
                self.add(str(node.conversation), node.created, node.node_count, node.speaker,
                         node.description)
        self._rows = max(self._rows, cache.n)

    def add(self, conversation: str, created: datetime, order: int, speaker: str | None,
            text: str) -> None:
        """Record one turn.

        Args:
            conversation: its conversation.
            created: when it was said.
            order: its node number (orders turns said at the same time).
            speaker: who said it.
            text: what was said.
        """
        turns = self._turns.setdefault(conversation, [])
        at = bisect.bisect_left(turns, (created, order), key=lambda t: (t[0], t[1]))
        if at < len(turns) and turns[at][:2] == (created, order):
            return  # held already (a re-keyed turn's new row)
        turns.insert(at, (created, order, speaker, text))

    def remove(self, nodes: Iterable[MemoryNode]) -> None:
        """Forget the turns of forgotten memories (each found by bisection).

        Args:
            nodes: the forgotten memories (those that are no turn are skipped).
        """
        for node in nodes:
            if not is_turn(node):
                continue
            turns = self._turns.get(str(node.conversation))
            if not turns:
                continue
            at = bisect.bisect_left(turns, (node.created, node.node_count),
                                    key=lambda t: (t[0], t[1]))
            if at < len(turns) and turns[at][1] == node.node_count:
                del turns[at]
            if not turns:
                del self._turns[str(node.conversation)]

    def before(self, conversation: str, created: datetime, order: int,
               n: int) -> list[tuple[datetime, int, Turn]]:
        """Up to ``n`` turns of ``conversation`` said before (``created``, ``order``).

        Args:
            conversation: the conversation.
            created: when the turn was said.
            order: its node number.
            n: how many earlier turns at most.

        Returns:
            ``(created, order, (speaker, text))`` of each, oldest first.
        """
        turns = self._turns.get(conversation, [])
        end = bisect.bisect_left(turns, (created, order), key=lambda t: (t[0], t[1]))
        return [(t[0], t[1], (t[2], t[3])) for t in turns[max(0, end - n):end]]

    def rekeyed(self, gone: Mapping[str, Collection[int]], key_of: Callable[[int], str],
                n: int, limit: int) -> dict[int, str]:
        """The new embedded texts of kept turns whose text quotes a turn going away.

        Each is :func:`turn_text` of the up to ``n`` kept turns before it, as an add makes
        it; a turn whose stored text quotes none of the turns going away keeps its text. A
        turn that has the new text already while a turn going away is among the ``n``
        before it is listed too: a forget interrupted before its commit point re-keyed it,
        and the processes that hold its old text must read it again.

        Args:
            gone: the numbers of the turns going away, by conversation.
            key_of: the stored embedding_key of a turn, by number.
            n: how many earlier turns a text holds (the stream's ``context_turns``).
            limit: the most characters of a text.

        Returns:
            ``{number: new embedding_key}`` of the turns whose text changes.
        """
        out: dict[int, str] = {}
        for conversation, numbers in gone.items():
            turns = self._turns.get(conversation, [])
            kept: list[tuple[datetime, int, str | None, str]] = []
            lost: list[Turn] = []
            for j, (_created, order, speaker, text) in enumerate(turns):
                if order in numbers:
                    lost.append((speaker, text))
                    continue
                kept.append(turns[j])
                if not lost:
                    continue
                previous = [(t[2], t[3]) for t in kept[-1 - n:-1]] if n else []
                new, old = turn_text(previous, speaker, text, limit), key_of(order)
                near = n > 0 and any(t[1] in numbers for t in turns[max(0, j - n):j])
                if (new != old and quotes(old, speaker, text, lost)) or (near and new == old):
                    out[order] = new
        return out
