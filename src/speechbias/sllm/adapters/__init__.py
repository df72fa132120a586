"""Speech-LLM adapters: Qwen2-Audio, generic chat-template audio LLMs, scripted policies, a tiny random
model for tests, and a chat-model answer judge. See :mod:`speechbias.sllm.adapters.base` for the contract."""
