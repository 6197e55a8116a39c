"""Deterministic generator of the bundled task suite `data/rubric-mix-lite/`.

Content (conditions and their treatments, phenomena and their key terms, personas and their in-character
phrases, IFEval-like verifiable constraints) lives as data in `suitegen/content/*.yaml`; the templates in
`suitegen/domains.py` turn it into prompts that read like real requests, most criteria carrying a
programmatic `Check`; `suitegen/generate.py` picks, splits and writes the suite.

Difficulty is spread on purpose for SmolLM2-135M-Instruct at 48 tokens: `easy` tasks use lenient checks on
terms the prompt practically forces (all-pass groups), `hard` tasks ask for obscure terms, lipograms, exact
bullet counts or all-lowercase text (all-fail groups), `medium` sit in between. Every task carries hidden
audit criteria that catch credit-without-content: a key content term *and* a minimum length, no keyword
stuffing, and no restating of the prompt. Key terms are single words or short phrases and reference answers
are full sentences, so a hint can name a term ("mention epinephrine") without containing the reference.

A tool package above `harness` (it imports only `harness`); the trainer's `harnessrl data generate` calls
it, and nothing in harness, memory, tools, agents or graphs imports it.
"""
