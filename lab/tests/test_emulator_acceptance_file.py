"""The emulator's run-time acceptance (SPECDEC_EMU_ACCEPTANCE_FILE), which the monitoring scenario
uses to lower acceptance while an engine serves."""

import os

from specdec_emulator.clock import Profile


def _touch(path, text, stamp):
    with open(path, "w") as fh:
        fh.write(text)
    os.utime(path, ns=(stamp, stamp))


def test_file_replaces_acceptance_while_it_exists(tmp_path):
    path = str(tmp_path / "acceptance")
    profile = Profile.load({"SPECDEC_EMU_ACCEPTANCE": "0.9,0.8", "SPECDEC_EMU_ACCEPTANCE_FILE": path})
    assert profile.acceptance == [0.9, 0.8]
    _touch(path, "0.2,0.1\n", 10**18)
    profile.refresh(force=True)
    assert profile.acceptance == [0.2, 0.1]
    assert profile.expected_tokens(2) == 1.3
    _touch(path, "[0.5]", 2 * 10**18)
    profile.refresh(force=True)
    assert profile.acceptance == [0.5]
    os.remove(path)
    profile.refresh(force=True)
    assert profile.acceptance == [0.9, 0.8]


def test_a_bad_file_keeps_the_current_acceptance(tmp_path, capsys):
    path = str(tmp_path / "acceptance")
    _touch(path, "0.4", 10**18)
    profile = Profile.load({"SPECDEC_EMU_ACCEPTANCE_FILE": path})
    assert profile.acceptance == [0.4]
    _touch(path, "0.1,0.5", 2 * 10**18)  # increasing: refused
    profile.refresh(force=True)
    assert profile.acceptance == [0.4]
    assert "ignored" in capsys.readouterr().err


def test_unchanged_file_is_not_read_again(tmp_path):
    path = str(tmp_path / "acceptance")
    _touch(path, "0.4", 10**18)
    profile = Profile.load({"SPECDEC_EMU_ACCEPTANCE_FILE": path})
    profile.acceptance = [0.3]  # a change the file did not make
    profile.refresh(force=True)
    assert profile.acceptance == [0.3]


def test_without_the_variable_nothing_is_watched():
    profile = Profile.load({})
    profile.refresh(force=True)
    assert profile.acceptance_file is None


def test_engine_iterations_follow_the_file(tmp_path):
    import asyncio
    from specdec_emulator import engine as engine_mod

    path = str(tmp_path / "acceptance")
    profile = Profile.load({"SPECDEC_EMU_ACCEPTANCE": "1,1,1", "SPECDEC_EMU_TARGET_STEP_MS": "1",
                            "SPECDEC_EMU_ACCEPTANCE_FILE": path})

    class Spec:
        enabled = True
        two_model = False
        per_pos_slots = 3

        @staticmethod
        def draft_len(batch):
            return 3

    async def run():
        eng = engine_mod.Engine(profile, Spec(), iter_stats=True)
        eng.start()
        req = eng.submit(4, 41)
        while req.generated < 41:
            await asyncio.sleep(0.005)
        first = eng.drain_stats()
        _touch(path, "0", 10**18)
        profile._acceptance_checked = 0.0
        req = eng.submit(4, 21)
        while req.generated < 21:
            await asyncio.sleep(0.005)
        second = eng.drain_stats()
        await eng.stop()
        return first, second

    first, second = asyncio.new_event_loop().run_until_complete(run())
    gen = [s["inflightBatchingStats"]["avgNumDecodedTokensPerIter"] for s in first
           if s["inflightBatchingStats"]["numGenRequests"]]
    assert gen and all(v == 4.0 for v in gen)
    gen = [s["inflightBatchingStats"]["avgNumDecodedTokensPerIter"] for s in second
           if s["inflightBatchingStats"]["numGenRequests"]]
    assert gen and all(v == 1.0 for v in gen)
