"""Running vLLM's OpenAI server on CPU from its own venv (setup_env.sh builds it, serve.py starts it)."""
