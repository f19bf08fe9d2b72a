"""Thoughts written after a conversation ends (the original's planning thought and memo).

When a chat ends, the original writes two thoughts, each with the chat as its evidence: a
planning thought ("For Maria Lopez's planning: ...") and a memo ("Maria Lopez ..."). It asks
the model six times for that (two texts, then a triple and a poignancy per thought);
:func:`reflect_on_conversation` asks four times: the two texts (concurrently), one batched
triple call and one batched importance call for both thoughts.

Example:
    .. code-block:: python

        from langchain_genmem.reflection import reflect_on_conversation

        done = reflect_on_conversation(model, stream, partner="Klaus Mueller")
        done.planning.description, done.memo.description, done.llm_calls  # ..., ..., 4
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig

from langchain_genmem.core.errors import ValidationError
from langchain_genmem.core.nodes import MemoryNode
from langchain_genmem.core.text import has_letter, limits, prepare_reply
from langchain_genmem.llm.importance import ImportanceScorer
from langchain_genmem.llm.shapes import sentence_shape
from langchain_genmem.memory.stream import MemoryStream
from langchain_genmem.reflection.graph import prompt_set
from langchain_genmem.reflection.settings import ReflectionSettings
from langchain_genmem.reflection.stages import Draft, PromptSet, write_thoughts
from langchain_genmem.reflection.state import Dropped
from langchain_genmem.reflection.steps import Ask, Runner, Step, drop, excerpt

__all__ = ["ConversationReflection", "areflect_on_conversation", "reflect_on_conversation"]

CONVERSATION_PROMPTS = ("planning", "memo", "triples")
_QUOTES = "\"'“”‘’「」"


@dataclass(frozen=True)
class ConversationReflection:
    """What :func:`reflect_on_conversation` wrote.

    Attributes:
        planning: the planning thought, or None when the reply was unusable.
        memo: the memo thought, or None when the reply was unusable.
        chat: the chat node used as evidence.
        llm_calls: model calls made (the importance scorer's included).
        original_llm_calls: what the original makes for the same thoughts (2 texts, then
            a triple and a poignancy call per thought written).
        dropped: unusable replies and fallback triples (see
            :mod:`langchain_genmem.reflection.state`).
    """

    planning: MemoryNode | None
    memo: MemoryNode | None
    chat: MemoryNode
    llm_calls: int = 0
    original_llm_calls: int = 0
    dropped: list[Dropped] = field(default_factory=list)

    @property
    def written(self) -> list[str]:
        """Node ids of the thoughts written."""
        return [node.node_id for node in (self.planning, self.memo) if node is not None]


def sentence(persona: str, reply: str) -> str | None:
    """The sentence about ``persona`` that a reply completes, or None if it holds none.

    The prompts end with an opening quote and the persona's name, so a completion model
    continues the sentence ("needs to ...\\"") and a chat model may write it whole
    ("Maria Lopez needs to ..."). Only the first line counts (the original keeps what
    comes before the closing quote); surrounding quotes are removed and the name is put
    in front when the reply does not start with it. The reply is cleaned and truncated
    first (:func:`~langchain_genmem.core.text.prepare_reply`); a sentence without a letter or
    longer than ``limits().thought`` characters is not one.

    Args:
        persona: the persona's name.
        reply: the model's reply.

    Returns:
        The sentence, starting with the persona's name.
    """
    lines = prepare_reply(reply).strip().strip(_QUOTES).strip().splitlines()
    text = lines[0].strip().strip(_QUOTES).strip() if lines else ""
    if not has_letter(text):
        return None
    text = text if text.casefold().startswith(persona.casefold()) else f"{persona} {text}"
    return text if len(text) <= limits().thought else None


def _conversation_text(chat: MemoryNode) -> str:
    """The chat's utterances, one "speaker: utterance" a line (the original's format)."""
    pairs = chat.filling if isinstance(chat.filling, list) else []
    return "".join(
        f"{pair[0]}: {pair[1]}\n"
        for pair in pairs
        if isinstance(pair, (list, tuple)) and len(pair) == 2
    )


def _prepare(
    stream: MemoryStream, partner: str, conversation: str | None
) -> tuple[MemoryNode, str]:
    if not isinstance(partner, str) or not partner.strip():
        msg = f"partner: expected the other speaker's name, got {partner!r}"
        raise ValidationError(msg, field="partner")
    chat = stream.last_chat(partner)
    if chat is None:
        msg = (
            f"partner: {stream.persona!r} has no chat with {partner!r} to use as evidence; "
            "add the chat first (stream.add_chat)"
        )
        raise ValidationError(msg, field="partner")
    text = _conversation_text(chat) if conversation is None else conversation
    if not text.strip():
        msg = f"conversation: empty, and the chat {chat.node_id} has no utterances to use"
        raise ValidationError(msg, field="conversation")
    return chat, text


def _reflect(
    stream: MemoryStream,
    prompts: PromptSet,
    chat: MemoryNode,
    partner: str,
    conversation: str,
) -> Step[ConversationReflection]:
    persona = stream.persona
    asked = ("planning", "memo")
    replies = yield Ask([prompts.call(name, persona, "sentence", sentence_shape(),
                                      conversation=conversation, partner=partner)
                         for name in asked])
    planning, memo = (sentence(persona, reply) for reply in replies)
    texts = {"planning": f"For {persona}'s planning: {planning}" if planning else None,
             "memo": memo}
    dropped = [
        drop(name, "unreadable_reply", text=excerpt(reply))
        for (name, text), reply in zip(texts.items(), replies, strict=False)
        if text is None
    ]
    topic = f"conversation with {partner}"
    drafts = {name: Draft(text, [chat.node_id], topic) for name, text in texts.items() if text}
    nodes: list[MemoryNode] = []
    if drafts:
        thoughts = list(drafts.values())
        nodes, lost = yield from write_thoughts(stream, prompts, thoughts, "conversation")
        dropped += lost
    written = dict(zip(drafts, nodes, strict=False))
    return ConversationReflection(
        planning=written.get("planning"),
        memo=written.get("memo"),
        chat=chat,
        original_llm_calls=2 + 2 * len(nodes),
        dropped=dropped,
    )


def _setup(
    model: BaseChatModel,
    stream: MemoryStream,
    partner: str,
    conversation: str | None,
    importance: ImportanceScorer | None,
    prompts: Mapping[str, str] | None,
    settings: ReflectionSettings | None,
) -> tuple[Runner, Step[ConversationReflection]]:
    chosen = prompt_set(prompts, CONVERSATION_PROMPTS)
    chat, text = _prepare(stream, partner, conversation)
    runner = Runner(model, stream, importance, ReflectionSettings.merged(settings))
    return runner, _reflect(stream, chosen, chat, partner, text)


def reflect_on_conversation(
    model: BaseChatModel,
    stream: MemoryStream,
    *,
    partner: str,
    conversation: str | None = None,
    importance: ImportanceScorer | None = None,
    prompts: Mapping[str, str] | None = None,
    config: RunnableConfig | None = None,
    settings: ReflectionSettings | None = None,
) -> ConversationReflection:
    """Write the planning thought and the memo of a conversation that just ended.

    Both thoughts have the last chat with ``partner`` as their evidence
    (``stream.last_chat(partner)``), are created at the stream's clock and expire 30 days
    later. Calls: the planning and memo texts (concurrently), ONE batched triple call and
    ONE batched importance call for both (the original rates these with its event prompt;
    here with the thought prompt, since they are thoughts). A reply with no sentence
    writes no thought for it (reported in ``dropped``); an unreadable triple falls back
    to (persona, ``"reflect"``, ``"conversation with <partner>"``).

    Args:
        model: any LangChain chat model.
        stream: the persona's memory stream.
        partner: the other speaker's name.
        conversation: the utterances, one "speaker: utterance" a line; None reads them
            from the chat's filling.
        importance: the poignancy scorer; None uses ``ImportanceScorer(model)``.
        prompts: overrides by name of ``planning``, ``memo`` and ``triples`` (fields
            ``{conversation}``, ``{persona}``, ``{partner}``; see
            :data:`~langchain_genmem.reflection.graph.DEFAULT_REFLECTION_PROMPTS`).
        config: a runnable config for the model calls (callbacks, tags).
        settings: the calls' bounds (``limits.sentence`` for the two texts), output form
            and budget; None for the defaults.

    Returns:
        The thoughts written, the chat, and the call counts.

    Raises:
        ValidationError: no chat with ``partner``, no conversation text, or bad prompts.
    """
    runner, step = _setup(model, stream, partner, conversation, importance, prompts, settings)
    result, calls, skipped = runner.run(step, config)
    return replace(result, llm_calls=calls, dropped=result.dropped + skipped)


async def areflect_on_conversation(
    model: BaseChatModel,
    stream: MemoryStream,
    *,
    partner: str,
    conversation: str | None = None,
    importance: ImportanceScorer | None = None,
    prompts: Mapping[str, str] | None = None,
    config: RunnableConfig | None = None,
    settings: ReflectionSettings | None = None,
) -> ConversationReflection:
    """Async :func:`reflect_on_conversation`: the same calls and results."""
    runner, step = _setup(model, stream, partner, conversation, importance, prompts, settings)
    result, calls, skipped = await runner.arun(step, config)
    return replace(result, llm_calls=calls, dropped=result.dropped + skipped)
