"""Run: platform, preflight, card, launch (process group | Ray job), artifacts, GPU slots, live follow, retries."""
