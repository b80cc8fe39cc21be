"""A policy served from a local Hugging Face model directory (the ``local`` extra).

:class:`HFLocalPolicy` answers requests from many concurrent episodes with one model:

* **Batching.** Requests that arrive within ``batch_window_s`` of each other, or while a batch is
  generating, are generated together (up to ``max_batch_size``), left-padded. All model and
  tokenizer work runs in one worker thread, never on the event loop.
* **Sampling per request.** ``temperature`` (0 = greedy), ``top_p``, ``top_k``, ``max_tokens``,
  ``stop`` and ``seed`` come from each request's :class:`~palaestra.llm.types.SamplingParams`;
  each row of a batch samples with its own parameters and its own seeded generator. Every
  response says what it was drawn with (``LLMResponse.sampling``: the values used, the
  policy's defaults filled in), so a trainer can check it recomputes the same distribution.
* **Token ids and logprobs.** Every response carries ``prompt_token_ids``,
  ``completion_token_ids`` (the end-of-sequence token included when generated) and ``logprobs``:
  the log-probability of each sampled token **under the distribution it was sampled from**, i.e.
  ``log_softmax(logits / temperature)`` restricted to the top-k tokens and the top-p nucleus and
  renormalised. With
  ``temperature=0`` (greedy) it is the plain ``log_softmax(logits)``. With temperature 1, top_p 1
  and no top_k this is exactly the model's own log-probability, what an RL trainer recomputes.
* **No retokenisation drift.** The chat template is applied to a conversation once. When a
  request extends one this policy answered before (same ``episode_id`` in the metadata, same
  messages up to the assistant turn it produced), its prompt ids are the earlier prompt ids +
  the earlier completion ids + the ids of the template's text for the new messages only. When
  the template renders the history in a way that cannot be lined up with the tokens the model
  produced (it rewrites the assistant's text, say), the whole conversation is tokenised afresh.
* **Weight updates.** :meth:`HFLocalPolicy.load_weights` swaps weights between batches and bumps
  ``policy_version``, which every response carries.

Stop strings end generation once the decoded completion contains one; the returned ``content``
is cut before it (as OpenAI does) while ``completion_token_ids`` keep every token generated.
``tools`` are passed to the chat template; when a request has tools, Hermes-style
``<tool_call>{...}</tool_call>`` blocks in the completion become ``tool_calls``
(:func:`parse_tool_calls`).

The parts: :mod:`.loading` (the checkpoint, device and dtype), :mod:`.batching` (grouping
concurrent requests), :mod:`.chat` (the chat template, the conversation memory and tool calls),
:mod:`.generation` (sampling a batch with its logprobs), :mod:`.policy` (the
:class:`~palaestra.llm.client.LLMClient` that serves requests with them) and :mod:`.tiny` (a
random tiny model for tests and benchmarks). torch and transformers are imported only when a
model loads, so this package imports without them.
"""

from palaestra.llm.local_hf.chat import parse_tool_calls
from palaestra.llm.local_hf.policy import HFLocalPolicy
from palaestra.llm.local_hf.tiny import TINY_CHAT_TEMPLATE, write_tiny_model

__all__ = ["TINY_CHAT_TEMPLATE", "HFLocalPolicy", "parse_tool_calls", "write_tiny_model"]
