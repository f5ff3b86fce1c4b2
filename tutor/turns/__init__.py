"""One turn end to end: the engine (screen, teach, ask the model, keep the reply), the
conversations and the learner's messages, the database half of a turn, the model's half
(model_turn), one reply per message across workers (claims), what reaches the page while
the model writes (live), form answers, prompts, imminent-risk alerts, the process's engine
(runtime) and the evaluation loop (evals, its suites in eval_suite).

May import teach, risk, understand, content, access, render, llm, contract and storage;
never web.
"""
