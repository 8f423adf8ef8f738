"""The agent layer: agents, their runs, and the host loops that drive the component's sessions.

Split by job as OMA splits its own agent layer, so a reader who knows OMA finds each job where
OMA keeps it:

- ``agent.py``: :class:`Agent` and :class:`AsyncAgent` (OMA's ``agent/agent.ts``): ``run``,
  ``stream``, ``prompt`` and the persistent history.
- ``runner.py`` and ``runner_async.py``: the loop that steps a session to its result, for the
  sync API and for asyncio (OMA's ``agent/runner.ts``), over ``host.py``: what answers each step
  (the hook, tools, backends, observers), the answers built one way for both loops.
- ``orchestrator.py``: :func:`run_agent` and :func:`run_agent_async` (OMA's ``runAgent`` in
  ``orchestrator/orchestrator.ts``).
- ``config.py``: an agent's keyword arguments as the component's configuration, and the
  provider's environment variables.
- ``input.py``: a run's input as the component takes it (OMA's ``agent/input.ts``).
- ``process_backend.py``: external backends (OMA's ``agent/process-backend.ts``).
- ``tool.py``: tools and what they return (OMA's ``tool/framework.ts``).
- ``result.py``: a run's result in OMA's ``AgentRunResult`` form, and its identity.
- ``values.py``: the component's typed values (stream events, tool-result content) as OMA JSON.
- ``cancel.py``: :class:`CancelToken`.
"""
