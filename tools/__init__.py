"""The agents' tools and what they call.

`tools.agent_tools` holds the LangChain tools the attributor and proposer use: they query the Chroma memory for
cross-task evidence and call the frozen-policy endpoint. Beside them sit what those tools and the critic call: the
frozen-policy endpoints (`tools.endpoint`, `tools.openai_endpoint`, `tools.local_endpoint`, `tools.vllm_cpu`), the
rubric judge (`tools.judge`), probe rollouts (`tools.probes`) and the critic's measurement of a candidate
(`tools.candidate`, `tools.group_metrics`, `tools.sequential`). The live-services registry of a run is
`graphs.services`.

Kept import-light on purpose (no torch, transformers or chromadb at import): import the submodule
you need (`tools.judge`, `tools.candidate`, `tools.agent_tools`, endpoints).
"""
