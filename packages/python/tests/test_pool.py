"""AgentPool and Semaphore (OMA's API in Python's idiom): the same cases as the JavaScript suite's
``pool.test.js``: the pool-wide cap, runs on one agent serialised, the registry's errors,
run_parallel's dict (failures as results), run_any's round robin, run with a stream callback,
get_status and shutdown; and real agents (async and sync) on a pool against the loopback
provider."""

import asyncio
import time

import pytest

import oma_component as oma
from loopback import Reply, anthropic_text


class Meter:
    def __init__(self):
        self.now = 0
        self.max = 0
        self.order = []


class FakeAgent:
    """A stand-in agent that records how many runs overlap, pool-wide and on itself."""

    def __init__(self, name, meter, fail=False, ms=0.02):
        self.name = name
        self.meter = meter
        self.fail = fail
        self.ms = ms
        self.own = 0
        self.own_max = 0
        self.resets = 0

    async def run(self, prompt):
        m = self.meter
        m.now += 1
        self.own += 1
        m.max = max(m.max, m.now)
        self.own_max = max(self.own_max, self.own)
        await asyncio.sleep(self.ms)
        m.now -= 1
        self.own -= 1
        m.order.append(f"{self.name}:{prompt}")
        if self.fail:
            raise RuntimeError(f"{self.name} broke")
        return {"success": True, "output": f"{self.name} says {prompt}", "messages": [],
                "tokenUsage": {"input_tokens": 1, "output_tokens": 2}, "toolCalls": []}

    async def stream(self, prompt):
        yield {"type": "text", "data": f"{self.name}:{prompt}"}
        if self.fail:
            yield {"type": "error", "data": RuntimeError("stream broke")}
            return
        yield {"type": "done", "data": {"success": True, "output": prompt, "messages": [],
                                        "tokenUsage": {"input_tokens": 0, "output_tokens": 0}, "toolCalls": []}}

    def reset(self):
        self.resets += 1


def test_semaphore_limit_active_pending_hand_over_in_arrival_order():
    with pytest.raises(ValueError, match="Semaphore max must be at least 1, got 0"):
        oma.Semaphore(0)

    async def main():
        s = oma.Semaphore(2)
        await s.acquire()
        await s.acquire()
        order = []

        async def take(label):
            await s.acquire()
            order.append(label)

        third = asyncio.ensure_future(take("third"))
        fourth = asyncio.ensure_future(take("fourth"))
        await asyncio.sleep(0)
        assert (s.limit, s.active, s.pending) == (2, 2, 2)
        s.release()
        await third
        assert (s.active, s.pending) == (2, 1)
        s.release()
        await fourth
        assert order == ["third", "fourth"]
        s.release()
        s.release()
        assert s.active == 0

        async def value():
            return "value"

        assert await s.run(value) == "value"

        async def inner():
            raise RuntimeError("inner")

        with pytest.raises(RuntimeError, match="inner"):
            await s.run(inner)
        assert s.active == 0

    asyncio.run(main())


def test_run_parallel_holds_the_cap_keys_results_by_agent_and_turns_a_failure_into_a_result():
    async def main():
        m = Meter()
        pool = oma.AgentPool(2)
        for name in ["a", "b", "c"]:
            pool.add(FakeAgent(name, m))
        pool.add(FakeAgent("bad", m, fail=True))
        assert pool.run_concurrency_limit == 2 and pool.available_run_slots == 2
        results = await pool.run_parallel([
            {"agent": "a", "prompt": "1"}, {"agent": "b", "prompt": "2"}, ("c", "3"),
            {"agent": "bad", "prompt": "4"}, {"agent": "ghost", "prompt": "5"},
        ])
        assert m.max == 2
        assert list(results) == ["a", "b", "c", "bad", "ghost"]
        assert results["c"]["output"] == "c says 3"
        assert results["bad"] == {"success": False, "output": "bad broke", "messages": [],
                                  "tokenUsage": {"input_tokens": 0, "output_tokens": 0}, "toolCalls": []}
        assert results["ghost"]["success"] is False
        assert results["ghost"]["output"] == "AgentPool: agent 'ghost' is not registered. Registered agents: [a, b, c, bad]"
        assert pool.available_run_slots == 2

    asyncio.run(main())


def test_runs_on_one_agent_never_overlap_and_a_waiting_run_holds_no_pool_slot():
    async def main():
        m = Meter()
        pool = oma.AgentPool(2)
        a, b = FakeAgent("a", m), FakeAgent("b", m)
        pool.add(a)
        pool.add(b)
        runs = [asyncio.ensure_future(pool.run("a", str(i))) for i in (1, 2, 3)]
        await asyncio.sleep(0.001)
        # a's second and third runs wait on a's lock, so b gets the free pool slot at once.
        started = time.monotonic()
        await pool.run("b", "x")
        assert time.monotonic() - started < 0.04
        await asyncio.gather(*runs)
        assert a.own_max == 1
        assert [e for e in m.order if e.startswith("a:")] == ["a:1", "a:2", "a:3"]

    asyncio.run(main())


def test_the_registry_add_twice_remove_get_list_unknown_names():
    async def main():
        pool = oma.AgentPool()
        assert pool.run_concurrency_limit == 5
        a = FakeAgent("a", Meter())
        pool.add(a)
        with pytest.raises(ValueError) as e:
            pool.add(FakeAgent("a", Meter()))
        assert str(e.value) == "AgentPool: agent 'a' is already registered. Call remove('a') before re-adding."
        assert pool.get("a") is a and pool.get("z") is None
        assert pool.list() == [a]
        with pytest.raises(KeyError) as e:
            await pool.run("z", "p")
        assert e.value.args[0] == "AgentPool: agent 'z' is not registered. Registered agents: [a]"
        pool.remove("a")
        with pytest.raises(KeyError) as e:
            pool.remove("a")
        assert e.value.args[0] == "AgentPool: agent 'a' is not registered."
        with pytest.raises(RuntimeError, match="AgentPool: cannot call run_any on an empty pool."):
            await pool.run_any("p")

    asyncio.run(main())


def test_run_any_goes_round_robin_get_status_counts_states_shutdown_resets():
    async def main():
        m = Meter()
        pool = oma.AgentPool(3)
        agents = [FakeAgent(n, m) for n in ("a", "b", "c")]
        for agent in agents:
            pool.add(agent)
        pool.add(FakeAgent("bad", m, fail=True))
        outputs = [(await pool.run_any(str(i)))["output"] for i in range(3)]
        assert outputs == ["a says 0", "b says 1", "c says 2"]
        with pytest.raises(RuntimeError, match="bad broke"):
            await pool.run_any("3")
        assert pool.get_status() == {"total": 4, "idle": 0, "running": 0, "completed": 3, "error": 1}
        assert (await pool.run_any("4"))["output"] == "a says 4"
        await pool.shutdown()
        assert pool.get_status() == {"total": 4, "idle": 4, "running": 0, "completed": 0, "error": 0}
        assert [a.resets for a in agents] == [1, 1, 1]

    asyncio.run(main())


def test_run_and_run_ephemeral_with_a_stream_callback():
    async def main():
        pool = oma.AgentPool(1)
        pool.add(FakeAgent("a", Meter()))
        seen = []

        def callback(event):
            seen.append(event["type"])
            raise RuntimeError("callback")

        result = await pool.run("a", "hi", stream_callback=callback)
        assert result["output"] == "hi"
        assert seen == ["text", "done"]
        with pytest.raises(RuntimeError, match="stream broke"):
            await pool.run_ephemeral(FakeAgent("e", Meter(), fail=True), "x", stream_callback=lambda e: None)

        class NoDone:
            name = "n"

            async def stream(self, prompt):
                yield {"type": "text", "data": "t"}

        assert await pool.run_ephemeral(NoDone(), "x", stream_callback=lambda e: None) == {
            "success": False, "output": "", "messages": [],
            "tokenUsage": {"input_tokens": 0, "output_tokens": 0}, "toolCalls": []}
        assert pool.available_run_slots == 1

    asyncio.run(main())


def test_real_agents_on_a_pool_against_the_loopback_provider(loop, anthropic):
    # Async agents and a sync one (run in a worker thread): results by agent, each agent's own
    # system prompt sent, then one more run.
    loop.script(*[Reply(body=anthropic_text("answer", 10, 4)) for _ in range(4)])

    async def main():
        pool = oma.AgentPool(2)
        for name in ("x", "y"):
            pool.add(oma.AsyncAgent(name=name, system_prompt=f"I am {name}", max_turns=1, **anthropic))
        pool.add(oma.Agent(name="z", system_prompt="I am z", max_turns=1, **anthropic))
        results = await pool.run_parallel([{"agent": n, "prompt": "p"} for n in ("x", "y", "z")])
        assert [(n, r["success"], r["output"], r["tokenUsage"]["output_tokens"]) for n, r in results.items()] == [
            ("x", True, "answer", 4), ("y", True, "answer", 4), ("z", True, "answer", 4)]
        assert sorted(r["body"]["system"] for r in loop.requests) == ["I am x", "I am y", "I am z"]
        assert (await pool.run("x", "again"))["success"]
        assert len(loop.requests) == 4
        assert pool.get_status() == {"total": 3, "idle": 0, "running": 0, "completed": 3, "error": 0}

    asyncio.run(main())
