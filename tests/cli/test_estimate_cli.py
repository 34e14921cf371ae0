"""`ollama-deck estimate`: the real entry point, from a saved /api/show reply or a live server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from app.core.units import GIB

ROOT = Path(__file__).resolve().parents[2]
QWEN_SHOW = str(ROOT / "tests/data/show_qwen3_14b.json")
QWEN_SIZE = "9000210784"
BASE = ["estimate", "--show", QWEN_SHOW, "--model-size", QWEN_SIZE]


def test_json_output_through_python_dash_m() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "app", *BASE, "--ctx", "32768", "--parallel", "1", "--kv-cache", "f16",
         "--flash-attention", "on", "--gpu-total-mib", "24564", "--gpu-used-mib", "600", "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key in ("weights_gpu_bytes", "weights_cpu_bytes", "kv_bytes", "compute_bytes", "overhead_bytes",
                "total_gpu_bytes", "layers_on_gpu", "layers_total", "verdict", "peak_gpu_bytes", "processor"):
        assert key in out
    assert out["kv_bytes"] == 5 * GIB and out["layers_total"] == 41
    assert out["verdict"] == "fits" and out["era"] == "C"
    assert out["total_gpu_bytes"] == (out["weights_gpu_bytes"] + out["kv_gpu_bytes"] + out["compute_bytes"]
                                      + out["overhead_bytes"])


def test_bad_input_exits_2_through_python_dash_m() -> None:
    proc = subprocess.run([sys.executable, "-m", "app", *BASE, "--ctx", "65536"],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 2
    assert "training context 40960" in proc.stderr and proc.stdout == ""


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--ctx", "32768", "--parallel", "4"]) == 0
    out = capsys.readouterr().out
    assert "KV cache on GPU" in out and "MiB" in out and "GiB" in out
    assert "verdict               Spills to the CPU" in out
    assert "several times slower" in out and "CPU/GPU" in out


def test_era_a_shows_ollamas_own_estimate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--ctx", "8192", "--ollama-version", "0.11.10", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["era"] == "A" and out["legacy"]["layers_model"] == 41
    assert out["legacy"]["total_bytes"] > out["total_gpu_bytes"]


def test_the_server_version_has_a_neutral_flag_beside_the_old_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--ctx", "8192", "--server-version", "0.11.10", "--json"]) == 0
    neutral = capsys.readouterr().out
    assert main([*BASE, "--ctx", "8192", "--ollama-version", "0.11.10", "--json"]) == 0
    assert capsys.readouterr().out == neutral and json.loads(neutral)["era"] == "A"
    assert main([*BASE, "--ctx", "8192"]) == 0
    assert "ollama     era C (Ollama >= 0.30, llama-server --fit)" in capsys.readouterr().out


def test_quantized_kv_without_flash_attention_is_noted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--ctx", "8192", "--kv-cache", "q8_0", "--flash-attention", "off"]) == 0
    assert "Ollama uses f16 instead" in capsys.readouterr().out


@pytest.mark.parametrize(("args", "message"), [
    (["estimate", "--show", "/nonexistent/show.json", "--model-size", "1", "--ctx", "4096"], "no such file"),
    (["estimate", "--show", QWEN_SHOW, "--ctx", "4096"], "--model-size"),
    (["estimate", "--ctx", "4096"], "no model given"),
    ([*BASE, "--ctx", "4096", "--parallel", "0"], "parallel must be at least 1"),
    ([*BASE, "--ctx", "4096", "--gpu-used-mib", "-5"], "must not be negative"),
    ([*BASE, "--ctx", "4096", "--ollama-version", "banana"], "cannot read Ollama version"),
    (["estimate", "--show", QWEN_SHOW, "--model-size", "-3", "--ctx", "4096"], "model size"),
])
def test_bad_input_names_the_problem(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_unknown_architecture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    show = json.loads(Path(QWEN_SHOW).read_text())
    show["model_info"]["general.architecture"] = "rwkv7"
    path = tmp_path / "show.json"
    path.write_text(json.dumps(show))
    assert main(["estimate", "--show", str(path), "--model-size", QWEN_SIZE, "--ctx", "4096"]) == 2
    assert "unsupported architecture 'rwkv7'" in capsys.readouterr().err


def test_invalid_choice_is_refused_by_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*BASE, "--ctx", "4096", "--kv-cache", "q5_0"])
    assert exc.value.code == 2 and "q5_0" in capsys.readouterr().err


def test_model_from_a_live_server(make_fake_ollama, capsys: pytest.CaptureFixture[str]) -> None:
    fake_ollama = make_fake_ollama(version="0.12.6")
    assert main(["estimate", "--model", "qwen3:14b", "--url", fake_ollama.url, "--ctx", "8192", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["era"] == "B"  # the stand-in reports version 0.12.6
    assert out["layers_total"] == 41 and out["kv_bytes"] == 40 * 8192 * 8 * 256 * 2
    names = [r.path for r in fake_ollama.requests]
    assert "/api/show" in names and "/api/tags" in names


def test_unknown_model_on_a_live_server(fake_ollama, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--model", "nope:1b", "--url", fake_ollama.url, "--ctx", "4096"]) == 2
    assert "not found" in capsys.readouterr().err


def test_server_down(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--model", "qwen3:14b", "--url", "http://127.0.0.1:9", "--ctx", "4096"]) == 2
    assert "127.0.0.1:9" in capsys.readouterr().err


def test_without_ctx_and_batch_the_servers_own_launch_is_priced(capsys: pytest.CaptureFixture[str]) -> None:
    # Ollama 0.32.15 on an H200: its VRAM default context (clamped to 40960) and its automatic -b/-ub 2048;
    # llama.cpp logged a 728 MiB compute buffer for this load (a batch of 512 priced 182 MiB)
    assert main([*BASE, "--ollama-version", "0.32.15", "--gpu-total-mib", "143771", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    plan = out["plan"]
    assert (plan["num_ctx"], plan["num_batch"], plan["num_ubatch"]) == (40960, 2048, 2048)
    assert plan["context_source"].startswith("Ollama's default") and plan["batch_source"].startswith("Ollama's automatic")
    assert any("-b 2048 -ub 2048" in line for line in plan["launch_lines"])
    assert round(out["compute_bytes"] / 2**20) == 728
    # given, they are priced as given
    assert main([*BASE, "--ollama-version", "0.32.15", "--gpu-total-mib", "143771", "--ctx", "8192", "--batch", "512",
                 "--json"]) == 0
    given = json.loads(capsys.readouterr().out)["plan"]
    assert (given["num_ctx"], given["num_batch"], given["context_source"], given["batch_source"]) == (
        8192, 512, "--ctx", "the batch setting")


def test_the_table_says_which_launch_it_priced(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--ollama-version", "0.32.15", "--parallel", "2"]) == 0
    out = capsys.readouterr().out
    assert "context    32768 per slot: Ollama's default" in out  # a 24 GiB card: 32768
    assert "batch      " in out and "Ollama's automatic batch" in out
    assert "launch     # llama-server as Ollama will start it" in out and "-np 2" in out
    assert "runtime    450 MiB, the default" in out


def test_llama_server_without_ctx_prices_the_training_context_in_each_slot(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--backend", "llama_server", "--parallel", "4", "--gpu-total-mib", "143771", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert (plan["num_ctx"], plan["ctx_total"], plan["num_batch"], plan["num_ubatch"]) == (40960, 163840, 2048, 512)
    assert plan["context_source"] == "llama-server's default, the model's training context in each slot"


def test_the_drivers_reserve_is_left_out_of_free_memory(capsys: pytest.CaptureFixture[str]) -> None:
    # a 24 GiB card simulated on an H200: nvidia-smi shows 118,593 MiB used and 24,564 MiB free, because its
    # "used" leaves out the driver's ~614 MiB reserve
    card = ["--gpu-total-mib", "143771", "--gpu-used-mib", "118593", "--ctx", "40960", "--parallel", "8",
            "--kv-cache", "q8_0", "--runtime-overhead-mib", "592", "--json"]
    assert main([*BASE, *card]) == 0
    without = json.loads(capsys.readouterr().out)
    assert main([*BASE, *card, "--gpu-reserved-mib", "614"]) == 0
    with_reserve = json.loads(capsys.readouterr().out)
    assert with_reserve["reserved_bytes"] == 614 * 2**20
    assert with_reserve["free_bytes"] == 24_564 * 2**20 == without["free_bytes"] - 614 * 2**20
    # the H200 placed 24 of 41 layers there (Ollama 0.32.15, -b 512); without the reserve 25 are priced
    assert (with_reserve["layers_on_gpu"], without["layers_on_gpu"]) == (24, 25)


def test_the_reserve_flag_is_explained_and_checked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    assert "nvidia-smi's" in capsys.readouterr().out
    assert main([*BASE, "--ctx", "4096", "--gpu-reserved-mib", "-1"]) == 2
    assert "--gpu-reserved-mib must not be negative" in capsys.readouterr().err
    assert main([*BASE, "--ctx", "4096", "--gpu-total-mib", "1000", "--gpu-used-mib", "900",
                 "--gpu-reserved-mib", "200"]) == 2
    assert "the driver's reserve (209715200) exceed the GPU's" in capsys.readouterr().err


def test_the_runtime_figure_and_its_source(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Given, it is priced as given; else the figure learnt on this machine's GPU where the card priced is that
    GPU (a stored runtime_allowance.json, as the app keeps it), else the default, each with its source shown."""
    from app.adapters.storage.allowance_store import AllowanceStore
    from app.cli import runtime_allowance as module
    from app.core.memory.allowance_learning import LearnedAllowance
    from app.core.telemetry import GpuInfo
    from app.core.units import MIB

    h200 = GpuInfo("NVIDIA H200", "580.159.04", 143771.0)
    AllowanceStore(tmp_path).save([LearnedAllowance(h200.name, h200.driver, (588 * MIB, 592 * MIB), 2,
                                                    "2026-12-02T15:40:00+00:00")])
    monkeypatch.setattr(module, "local_gpu", lambda: h200)  # no NVIDIA GPU on this machine: its reading, recorded
    common = [*BASE, "--ctx", "4096", "--config-dir", str(tmp_path)]

    assert main([*common, "--gpu-total-mib", "143771", "--json"]) == 0
    learnt = json.loads(capsys.readouterr().out)
    assert learnt["overhead_bytes"] == 590 * MIB and learnt["allowance"]["source"] == "learned"
    assert learnt["allowance"]["described"].startswith("590 MiB, learnt on NVIDIA H200 (driver 580.159.04) from 2 loads")

    assert main([*common, "--gpu-total-mib", "143771"]) == 0
    table = capsys.readouterr().out
    assert "runtime    590 MiB, learnt on NVIDIA H200 (driver 580.159.04) from 2 loads" in table
    assert "runtime (CUDA)             590.0    0.58" in table

    assert main([*common]) == 0  # a 4090 priced on the H200 machine: not this GPU, the default
    assert "runtime    450 MiB, the default for a consumer card" in capsys.readouterr().out

    assert main([*common, "--gpu-total-mib", "143771", "--runtime-overhead-mib", "600", "--json"]) == 0
    given = json.loads(capsys.readouterr().out)
    assert given["overhead_bytes"] == 600 * MIB and given["allowance"]["described"] == "600 MiB, as given"
