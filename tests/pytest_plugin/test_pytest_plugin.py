"""The pytest plugin through pytester: fixture, marker, session option, and inert when unused."""

# Each inner session runs in a process of its own: the plugin sets the global tracer
# provider, which OpenTelemetry lets a process set only once.

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

# The inner tests time workflows with the real clock: known sleeps against limits far
# away on either side, so that a slow machine cannot flip a verdict. A measured sleep
# is matched from below only ("[3-9]??.? ms" for 300 ms: never less, up to 999.9 ms),
# since load stretches a sleep but never shortens it.
WORKFLOWS = """
import time
import chainlat

def answer(retrieve_s=0.005, chat_s=0.01):
    with chainlat.workflow("support-chat"):
        with chainlat.data_stage("retrieve-docs"):
            time.sleep(retrieve_s)
        with chainlat.inference("gpt-4o") as call:
            time.sleep(chat_s / 2)
            call.first_token()
            time.sleep(chat_s / 2)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(workflows=WORKFLOWS)
    pytester.makefile(
        ".toml",
        chainlat="""
            [workflows.support-chat]
            total = "5s"
            p95 = "4s"
            [workflows.support-chat.steps."data retrieve-docs"]
            max = "150ms"
        """,
    )
    return pytester


def test_fixture_passes_and_fails_on_inline_limits(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_app="""
        from workflows import answer

        def test_fast(chainlat_traces):
            answer()
            answer()
            (first, second) = chainlat_traces.runs
            assert first.workflow == "support-chat" and first.rollup.total_ms >= 15
            assert [s.name for s in first.steps] == ["data retrieve-docs", "chat gpt-4o"]
            chainlat_traces.assert_within_budget("support-chat", total="5s", p95="4s")

        def test_slow(chainlat_traces):
            answer(retrieve_s=0.3)
            chainlat_traces.assert_within_budget(
                "support-chat", steps={"data retrieve-docs": {"max": "100ms"}}
            )
        """
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*latency budget broken (1 run):",
            '*support-chat: steps."data retrieve-docs".max [3-9]??.? ms > 100 ms in 1 of 1 run',
            "*support-chat run * (test_app.py::test_slow): total *",
            "*data retrieve-docs * <-- max [3-9]??.? ms > 100 ms",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_fixture_reads_the_budget_file(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_app="""
        from workflows import answer

        def test_within(chainlat_traces):
            answer()
            chainlat_traces.assert_within_budget("support-chat")

        def test_broken(chainlat_traces):
            answer(retrieve_s=0.2)
            chainlat_traces.assert_within_budget("support-chat")

        def test_unknown(chainlat_traces):
            answer()
            chainlat_traces.assert_within_budget("checkout")
        """
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            '*support-chat: steps."data retrieve-docs".max [2-9]??.? ms > 150 ms in 1 of 1 run',
            "*no budget for workflow 'checkout' in *chainlat.toml (budgeted: support-chat)",
        ]
    )


def test_marker(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_app="""
        import pytest
        from workflows import answer

        STEPS = {"chat gpt-4o": {"ttft": "2s"}}

        @pytest.mark.latency_budget("support-chat", total="5s", steps=STEPS)
        def test_within():
            answer()

        @pytest.mark.latency_budget("support-chat", total="100ms")
        def test_too_slow():
            answer(chat_s=0.3)

        @pytest.mark.latency_budget("support-chat", p50="1ms")
        def test_percentile_broken():
            answer()
            answer()

        @pytest.mark.latency_budget("checkout", total="1s")
        def test_other_workflow():
            answer()

        @pytest.mark.latency_budget("support-chat", total="soon")
        def test_bad_limit():
            answer()
        """
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--strict-markers")
    result.assert_outcomes(passed=1, failed=4)
    result.stdout.fnmatch_lines_random(
        [
            "*support-chat: total [3-9]??.? ms > 100 ms in 1 of 1 run",
            "*invoke_workflow support-chat * <-- total [3-9]??.? ms > 100 ms",
            "*support-chat: p50.total *.? ms > 1 ms over 2 runs",
            "*no run of 'checkout' ran in the test (captured: support-chat)",
            "*@pytest.mark.latency_budget('support-chat'): total: expected a duration like*",
        ]
    )


def test_session_option_judges_percentiles_over_the_session(project: pytest.Pytester) -> None:
    project.makefile(
        ".toml",
        session_budgets="""
            [workflows.support-chat]
            total = "5s"
            p50 = "100ms"
        """,
    )
    # three fast runs and two slow ones: no single test breaks "total", but the
    # session's p50 (3rd of 5) is fast and its p99 is slow
    project.makepyfile(
        test_app="""
        from workflows import answer

        def test_one():
            answer()

        def test_two():
            answer()
            answer(retrieve_s=0.25)

        def test_three():
            answer()
            answer(retrieve_s=0.25)
        """
    )
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "--chainlat-budgets=session_budgets.toml"
    )
    result.assert_outcomes(passed=3)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*chainlat latency budgets*",
            "*support-chat: 5 runs*",
            "*p50.total*100 ms*ok*",
            "OK: all 2 limits judged and kept",
        ]
    )

    project.makefile(".toml", session_budgets='[workflows.support-chat]\np90 = "100ms"\n')
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "--chainlat-budgets=session_budgets.toml"
    )
    result.assert_outcomes(passed=3)  # every test passed, yet the session failed
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*p90.total*100 ms*[2-9]??.? ms*BROKEN*",
            "*chainlat: FAILED: 1 of 1 limit broken, 0 not judged: failing the session*",
        ]
    )


def test_session_budgets_from_the_ini_file(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nchainlat_budgets = chainlat.toml\n")
    project.makepyfile(
        test_app="""
        from workflows import answer

        def test_slow_retrieval():
            answer(retrieve_s=0.2)
        """
    )
    result = project.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            '*worst run for workflows.support-chat.steps."data retrieve-docs".max:',
            "*support-chat run * (test_app.py::test_slow_retrieval): total *",
        ]
    )


def test_bad_session_budget_file_is_a_usage_error(project: pytest.Pytester) -> None:
    project.makefile(".toml", bad="[workflows.x]\ntotal = -1\n")
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--chainlat-budgets=bad.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*chainlat budgets: bad.toml: workflows.x.total: a limit cannot be negative, got -1"]
    )


def test_inert_when_unused(pytester: pytest.Pytester) -> None:
    """Loaded through the entry point, yet no provider is set and no hook installed."""
    pytester.makepyfile(
        test_app="""
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from chainlat._runtime import hooks

        def test_nothing_changed(request):
            assert request.config.pluginmanager.hasplugin("chainlat")
            assert not isinstance(trace.get_tracer_provider(), TracerProvider)
            assert hooks.end_callbacks() == () and hooks.after_callbacks() == ()
            assert not request.config.pluginmanager.hasplugin("chainlat-session-budgets")
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_misspelled_step_fails_the_test_with_a_suggestion(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_app="""
        from workflows import answer

        def test_typo(chainlat_traces):
            answer()
            chainlat_traces.assert_within_budget(
                "support-chat", steps={"chat gpt-4": {"max": "1ms"}}
            )

        def test_optional(chainlat_traces):
            answer()
            chainlat_traces.assert_within_budget(
                "support-chat", steps={"tool rare": {"max": "1ms", "optional": True}}
            )
        """
    )
    result = project.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*workflows.support-chat.steps.\"chat gpt-4\": no run of 'support-chat' has a step "
            "'chat gpt-4' (did you mean 'chat gpt-4o'?)*"
        ]
    )
