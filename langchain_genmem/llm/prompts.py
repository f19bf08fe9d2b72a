"""Prompts of importance scoring, reflection and post-conversation thoughts.

Every prompt is a ``str`` template filled with :meth:`str.format`. The wording follows the
prompts of the original Generative Agents code (``poignancy_*_v1``, ``generate_focal_pt_v1``,
``insight_and_evidence_v1``, ``planning_thought_on_convo_v1``, ``memo_on_convo_v1``; trailing
spaces dropped) and the system prompts of the stepwise design. The two batched prompts are this
package's own: they ask for one answer a line, "N. answer", so that one call serves many
items. Numbered lists come from :func:`langchain_genmem.llm.parsers.format_numbered`, whose
output ends with a line break; the numbers a prompt shows are the numbers the model cites
back. Nothing in the structure depends on the language: names, memories and statements
may be in any language.

Fields:

* Importance of one memory, one template per node type (also in the mapping
  ``DEFAULT_IMPORTANCE_PROMPTS``, keyed by ``"event"``, ``"thought"``, ``"chat"``):
  ``DEFAULT_EVENT_IMPORTANCE_PROMPT``, ``DEFAULT_THOUGHT_IMPORTANCE_PROMPT``,
  ``DEFAULT_CHAT_IMPORTANCE_PROMPT``.
  ``{persona}`` the persona's name; ``{persona_description}`` a few sentences about the
  persona (the original's identity set, may be empty); ``{description}`` the memory.
* ``DEFAULT_BATCH_IMPORTANCE_PROMPT``: several memories in one call.
  ``{persona}``, ``{persona_description}`` as above; ``{n}`` how many memories;
  ``{memories}`` the memories numbered from 1, each marked with its type
  (``"1. [event] …\\n2. [chat] …\\n"``). Answer: one "N. rating" line per memory.
* ``DEFAULT_FOCAL_POINTS_PROMPT``: ``{statements}`` the recent memories, one a line;
  ``{n}`` how many questions. The prompt ends with "1)" as in the original.
* ``DEFAULT_INSIGHTS_PROMPT``: ``{statements}`` the evidence numbered from 0
  (``format_numbered(texts)``); ``{n}`` how many insights. Answers look like
  "insight (because of 1, 5, 3)"; the prompt ends with "1." as in the original.
* ``DEFAULT_CONDENSE_PROMPT``: ``{insights}`` the insights to condense, one a line, each
  with its evidence numbers in square brackets.
* ``DEFAULT_BATCH_TRIPLE_PROMPT``: ``{statements}`` numbered from 1; ``{n}`` how many.
  Answer: one "N. (subject, predicate, object)" line per statement.
* ``DEFAULT_PLANNING_THOUGHT_PROMPT`` and ``DEFAULT_MEMO_PROMPT`` (after a conversation):
  ``{conversation}`` the utterances, one "speaker: utterance" a line; ``{persona}`` the
  persona's name. Both end with an opening quote and the name, so the reply continues a
  sentence about the persona.
* ``DEFAULT_SUB_QUESTIONS_PROMPT`` (a recall that splits its question,
  :mod:`~langchain_genmem.llm.sub_questions`): ``{question}`` the question; ``{n}`` the most
  sub-questions. It ends with "1)" like the focal points, and is read the same way.
* System prompts of the stepwise design: ``DEFAULT_IMPORTANCE_SYSTEM_PROMPT``,
  ``DEFAULT_QUESTIONS_SYSTEM_PROMPT`` and ``DEFAULT_INSIGHTS_SYSTEM_PROMPT`` have no
  field; ``DEFAULT_CONDENSE_SYSTEM_PROMPT`` has ``{n}``, the most bullet points to keep
  (5 in the stepwise design).

Structured form: where the chat model's server accepts a JSON schema (OpenAI and compatible
servers: llama.cpp enforces it by grammar), each call asks with a ``STRUCTURED_*`` twin of
the prompt above, with the same fields, whose last words ask for the JSON object the schema
describes (:mod:`~langchain_genmem.llm.shapes`) instead of the text format:

* ``STRUCTURED_EVENT_IMPORTANCE_PROMPT``, ``STRUCTURED_THOUGHT_IMPORTANCE_PROMPT``,
  ``STRUCTURED_CHAT_IMPORTANCE_PROMPT`` (mapping ``STRUCTURED_IMPORTANCE_PROMPTS``):
  ``{"rating": 7}``.
* ``STRUCTURED_BATCH_IMPORTANCE_PROMPT``: ``{"ratings": [7, 3]}``, one per memory.
* ``STRUCTURED_FOCAL_POINTS_PROMPT``: ``{"questions": [...]}``, at most ``{n}``.
* ``STRUCTURED_SUB_QUESTIONS_PROMPT``: the same shape.
* ``STRUCTURED_INSIGHTS_SYSTEM_PROMPT`` and ``STRUCTURED_INSIGHTS_PROMPT``:
  ``{"insights": [{"insight": "...", "evidence": [1, 5]}]}``.
* ``STRUCTURED_CONDENSE_SYSTEM_PROMPT`` (``{n}``) and ``STRUCTURED_CONDENSE_PROMPT``: the
  same shape as the insights.
* ``STRUCTURED_BATCH_TRIPLE_PROMPT``: ``{"triples": [{"subject": ..., "predicate": ...,
  "object": ...}]}``, one per statement.
* ``STRUCTURED_PLANNING_THOUGHT_PROMPT`` and ``STRUCTURED_MEMO_PROMPT``:
  ``{"sentence": "..."}``, a sentence starting with the persona's name.

The questions' system prompt has no format in it and serves both forms. A prompt given by
name (``prompts={...}``) is used in both forms; the schema still shapes the reply.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "DEFAULT_BATCH_IMPORTANCE_PROMPT",
    "DEFAULT_BATCH_TRIPLE_PROMPT",
    "DEFAULT_CHAT_IMPORTANCE_PROMPT",
    "DEFAULT_CONDENSE_PROMPT",
    "DEFAULT_CONDENSE_SYSTEM_PROMPT",
    "DEFAULT_EVENT_IMPORTANCE_PROMPT",
    "DEFAULT_FOCAL_POINTS_PROMPT",
    "DEFAULT_IMPORTANCE_PROMPTS",
    "DEFAULT_IMPORTANCE_SYSTEM_PROMPT",
    "DEFAULT_INSIGHTS_PROMPT",
    "DEFAULT_INSIGHTS_SYSTEM_PROMPT",
    "DEFAULT_MEMO_PROMPT",
    "DEFAULT_PLANNING_THOUGHT_PROMPT",
    "DEFAULT_QUESTIONS_SYSTEM_PROMPT",
    "DEFAULT_SUB_QUESTIONS_PROMPT",
    "DEFAULT_THOUGHT_IMPORTANCE_PROMPT",
    "STRUCTURED_BATCH_IMPORTANCE_PROMPT",
    "STRUCTURED_BATCH_TRIPLE_PROMPT",
    "STRUCTURED_CHAT_IMPORTANCE_PROMPT",
    "STRUCTURED_CONDENSE_PROMPT",
    "STRUCTURED_CONDENSE_SYSTEM_PROMPT",
    "STRUCTURED_EVENT_IMPORTANCE_PROMPT",
    "STRUCTURED_FOCAL_POINTS_PROMPT",
    "STRUCTURED_IMPORTANCE_PROMPTS",
    "STRUCTURED_INSIGHTS_PROMPT",
    "STRUCTURED_INSIGHTS_SYSTEM_PROMPT",
    "STRUCTURED_MEMO_PROMPT",
    "STRUCTURED_PLANNING_THOUGHT_PROMPT",
    "STRUCTURED_SUB_QUESTIONS_PROMPT",
    "STRUCTURED_THOUGHT_IMPORTANCE_PROMPT",
]

# --- importance (poignancy) -------------------------------------------------------------

DEFAULT_IMPORTANCE_SYSTEM_PROMPT = (
    "You are an AI who rates events in terms of their perceived importance on a scale of 1 to 10."
)

_PERSONA = "Here is a brief description of {persona}.\n{persona_description}\n\n"
_SCALE = "On the scale of 1 to 10, where 1 is purely mundane "
_RATE = "Rate (return a number between 1 to 10):"

_RATE_JSON = 'Answer in JSON as {{"rating": N}}, N a whole number from 1 to 10.'

_EVENT_IMPORTANCE = (
    _PERSONA + _SCALE + "(e.g., brushing teeth, making bed) and 10 is extremely poignant "
    "(e.g., a break up, college acceptance), rate the likely poignancy of the following "
    "event for {persona}.\n\nEvent: {description}\n"
)
_THOUGHT_IMPORTANCE = (
    _PERSONA + _SCALE + "(e.g., I need to do the dishes, I need to walk the dog) and 10 is "
    "extremely poignant (e.g., I wish to become a professor, I love Elie), rate the likely "
    "poignancy of the following thought for {persona}.\n\nThought: {description}\n"
)
_CHAT_IMPORTANCE = (
    _PERSONA + _SCALE + "(e.g., routine morning greetings) and 10 is extremely poignant "
    "(e.g., a conversation about breaking up, a fight), rate the likely poignancy of the "
    "following conversation for {persona}.\n\nConversation:\n{description}\n\n"
)

DEFAULT_EVENT_IMPORTANCE_PROMPT = _EVENT_IMPORTANCE + _RATE
DEFAULT_THOUGHT_IMPORTANCE_PROMPT = _THOUGHT_IMPORTANCE + _RATE
DEFAULT_CHAT_IMPORTANCE_PROMPT = _CHAT_IMPORTANCE + _RATE
STRUCTURED_EVENT_IMPORTANCE_PROMPT = _EVENT_IMPORTANCE + _RATE_JSON
STRUCTURED_THOUGHT_IMPORTANCE_PROMPT = _THOUGHT_IMPORTANCE + _RATE_JSON
STRUCTURED_CHAT_IMPORTANCE_PROMPT = _CHAT_IMPORTANCE + _RATE_JSON

DEFAULT_IMPORTANCE_PROMPTS: Mapping[str, str] = MappingProxyType(
    {
        "event": DEFAULT_EVENT_IMPORTANCE_PROMPT,
        "thought": DEFAULT_THOUGHT_IMPORTANCE_PROMPT,
        "chat": DEFAULT_CHAT_IMPORTANCE_PROMPT,
    }
)

STRUCTURED_IMPORTANCE_PROMPTS: Mapping[str, str] = MappingProxyType(
    {
        "event": STRUCTURED_EVENT_IMPORTANCE_PROMPT,
        "thought": STRUCTURED_THOUGHT_IMPORTANCE_PROMPT,
        "chat": STRUCTURED_CHAT_IMPORTANCE_PROMPT,
    }
)

_BATCH_IMPORTANCE = (
    _PERSONA + _SCALE + "(e.g., brushing teeth, making bed, routine morning greetings, "
    "I need to do the dishes) and 10 is extremely poignant (e.g., a break up, college "
    "acceptance, a conversation about breaking up, a fight, I wish to become a professor), "
    "rate the likely poignancy of each of the following {n} memories for {persona}. Each "
    "memory is marked as an event, a thought or a chat (a conversation).\n\n"
    "Memories:\n{memories}\n"
)

STRUCTURED_BATCH_IMPORTANCE_PROMPT = _BATCH_IMPORTANCE + (
    'Answer in JSON as {{"ratings": [...]}}: {n} whole numbers from 1 to 10, the rating of '
    "each memory in the order of the list."
)

DEFAULT_BATCH_IMPORTANCE_PROMPT = _BATCH_IMPORTANCE + (
    'Rate each memory on its own line as "N. rating", where N is the number of the memory '
    "and rating is a number between 1 to 10. Write nothing else."
)

# --- reflection: focal points, insights, condensation ---------------------------------

DEFAULT_QUESTIONS_SYSTEM_PROMPT = (
    "You are an intelligent AI system designed to reflect on past experiences and generate "
    "meaningful insights.\n"
    "Your goal is to help the user gain a deeper understanding of their experiences and "
    "identify patterns or themes that may not have been immediately obvious.\n"
    "When generating questions, focus on high-level, abstract questions that will prompt "
    "the subject to think more deeply about their experiences.\n"
    "Avoid simple, surface-level questions that can easily be answered by the memories "
    "themselves."
)

_FOCAL_POINTS = (
    "{statements}\n\nGiven only the information above, what are {n} most salient high-level "
    "questions we can answer about the subjects grounded in the statements?\n"
)
DEFAULT_FOCAL_POINTS_PROMPT = _FOCAL_POINTS + "1)"
STRUCTURED_FOCAL_POINTS_PROMPT = _FOCAL_POINTS + (
    'Answer in JSON as {{"questions": [...]}}, at most {n} questions.'
)

_INSIGHTS_SYSTEM = (
    "You are an intelligent AI system designed to reflect on past experiences and generate "
    "meaningful insights.\n"
    "Your goal is to help yourself gain a deeper understanding of your experiences and "
    "identify patterns or themes that may not have been immediately obvious.\n"
    "When generating insights, focus on high-level, abstract insights that will prompt you "
    "to think more deeply about your experiences.\n"
)

STRUCTURED_INSIGHTS_SYSTEM_PROMPT = _INSIGHTS_SYSTEM + (
    "Cite the index numbers of the statements as evidence, do not explicitly mention the "
    "statement or evidence. Be as concise and specific as possible."
)

DEFAULT_INSIGHTS_SYSTEM_PROMPT = _INSIGHTS_SYSTEM + (
    "Cite the index of the statement as evidence, do not explicitly mention the statement "
    'or evidence. The desired format is: "\n'
    "1. insight [`index number(s) of evidence`]\n"
    "2. insight [`index number(s) of evidence`]\n"
    "3. insight [`index number(s) of evidence`]\n"
    'etc"\n\n'
    "REQUIREMENTS:\n"
    "- You MUST ensure to use square brackets enclosing the index numbers at the end of "
    "each insight.\n"
    "- You MUST only include one insight per line.\n"
    "- You MUST be as concise and specific as possible"
)

_INSIGHTS = (
    "Input:\n{statements}\n\nWhat {n} high-level insights can you infer from the above "
    "statements? "
)
DEFAULT_INSIGHTS_PROMPT = _INSIGHTS + "(example format: insight (because of 1, 5, 3))\n1."
STRUCTURED_INSIGHTS_PROMPT = _INSIGHTS + (
    'Answer in JSON as {{"insights": [{{"insight": "...", "evidence": [1, 5, 3]}}]}}, the '
    "evidence being the numbers of the statements."
)

DEFAULT_CONDENSE_SYSTEM_PROMPT = (
    "You are an AI who is an expert at condensing information into concise numbered, "
    "bullet points.\n"
    "Please condense the following insights into a maximum of {n} bullet points, each "
    "starting with a number followed by a period.\n"
    "Include all the appropriate index numbers referencing the information in square "
    "brackets, listed at the end of each insight.\n"
    "Do not include multiple, unrelated insights in one bullet point. Ensure each insight "
    "explicitly mentions the subject by name."
)

DEFAULT_CONDENSE_PROMPT = "Please condense the insights generated in this list:\n\n{insights}\n"

STRUCTURED_CONDENSE_SYSTEM_PROMPT = (
    "You are an AI who is an expert at condensing information into concise insights.\n"
    "Please condense the following insights into a maximum of {n} insights, each keeping "
    "all the appropriate index numbers referencing the information as its evidence.\n"
    "Do not include multiple, unrelated insights in one. Ensure each insight explicitly "
    "mentions the subject by name."
)

STRUCTURED_CONDENSE_PROMPT = DEFAULT_CONDENSE_PROMPT + (
    '\nAnswer in JSON as {{"insights": [{{"insight": "...", "evidence": [1, 5, 3]}}]}}.'
)

# --- structure: (subject, predicate, object) ---------------------------------------------

_BATCH_TRIPLE = (
    "Turn each of the following {n} statements into a (subject, predicate, object) triple: "
    "the subject and the object are short noun phrases, the predicate a short verb phrase "
    'in its base form. For example, "Dolores Murphy is eating breakfast." becomes '
    "(Dolores Murphy, eat, breakfast).\n\n"
    "Statements:\n{statements}\n"
)

STRUCTURED_BATCH_TRIPLE_PROMPT = _BATCH_TRIPLE + (
    'Answer in JSON as {{"triples": [{{"subject": "...", "predicate": "...", "object": '
    '"..."}}]}}, one triple per statement, in the order of the list.'
)

DEFAULT_BATCH_TRIPLE_PROMPT = _BATCH_TRIPLE + (
    'Write one triple per statement on its own line as "N. (subject, predicate, object)", '
    "where N is the number of the statement. Write nothing else."
)

# --- after a conversation ------------------------------------------------------------------

_PLANNING_THOUGHT = (
    "[Conversation]\n{conversation}\n\nWrite down if there is anything from the conversation "
    "that {persona} need to remember for her planning, from {persona}'s perspective, in a "
    "full sentence.\n\n"
)
_MEMO = (
    "[Conversation]\n{conversation}\n\nWrite down if there is anything from the conversation "
    "that {persona} might have found interesting from {persona}'s perspective, in a full "
    "sentence.\n\n"
)
_SENTENCE_JSON = 'Answer in JSON as {{"sentence": "..."}}, a sentence starting with {persona}.'

DEFAULT_PLANNING_THOUGHT_PROMPT = _PLANNING_THOUGHT + '"{persona}'
DEFAULT_MEMO_PROMPT = _MEMO + '"{persona}'
STRUCTURED_PLANNING_THOUGHT_PROMPT = _PLANNING_THOUGHT + _SENTENCE_JSON
STRUCTURED_MEMO_PROMPT = _MEMO + _SENTENCE_JSON

# --- recall: a question split into the parts its answer gathers ------------------------

_SUB_QUESTIONS = (
    "Question: {question}\n\n"
    "The answer may be spread over several moments of a long conversation. Write at most {n} "
    "short search queries, each one self-contained and asking for one part of the answer. "
    "Keep every name as it is and write in the language of the question.\n"
)
DEFAULT_SUB_QUESTIONS_PROMPT = _SUB_QUESTIONS + "1)"
STRUCTURED_SUB_QUESTIONS_PROMPT = _SUB_QUESTIONS + (
    'Answer in JSON as {{"questions": [...]}}, at most {n} queries.'
)
