"""The shared settings as llama-server's flags: the exact command line, per-slot context × parallel,
what it cannot take, and extra flags checked against the installed build's recorded --help."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from app.backends.llama_server import engine, help_flags, tuning
from app.backends.llama_server.known_flags import FLAG_GROUPS, VALUE_COUNTS
from app.backends.llama_server.tuning import LLAMA_SERVER_TUNING, llama_server_settings
from app.core.server.exposure import exposure_of
from app.core.server.mapping import MODEL_FILE, OPTION_KINDS
from app.core.server.settings import ServerSettings

HELP_TEXT = (Path(__file__).resolve().parents[2] / "data" / "llama_server" / "help.txt").read_text(encoding="utf-8")


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    """A file that starts like a GGUF (the magic); enough for the form's check."""
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def _args(settings: ServerSettings) -> list[str]:
    return tuning.arguments(settings)


def _value_of(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def test_the_recorded_flag_list_is_the_recorded_help():
    assert tuple(help_flags.flag_groups(HELP_TEXT)) == FLAG_GROUPS
    assert ("-np", "--parallel") in FLAG_GROUPS and ("-c", "--ctx-size") in FLAG_GROUPS
    assert ("-ngl", "--gpu-layers", "--n-gpu-layers") in FLAG_GROUPS
    assert "--mlock" not in help_flags.known_flags()  # this build has --mmap modes instead
    assert {names[0]: count for names, count in help_flags.flag_options(HELP_TEXT)} == VALUE_COUNTS
    assert (VALUE_COUNTS["--host"], VALUE_COUNTS["--no-host"], VALUE_COUNTS["--control-vector-layer-range"]) == (1, 0, 2)
    assert help_flags.value_count("--cors-credentials") == 0 and help_flags.value_count("-otd") == 1


def test_every_flag_the_app_writes_is_a_real_flag(gguf: Path):
    settings = llama_server_settings(ServerSettings(num_parallel=3, context_length=4096, kv_cache_type="q4_0",
                                                    flash_attention="on", batch_size=1024, micro_batch_size=256),
                                     model_path=str(gguf), n_gpu_layers=20, threads=2)
    written = [word for word in _args(settings) if word.startswith("-")]
    assert set(written) <= help_flags.known_flags()
    # -m --alias --host --port -np -c -ctk -ctv -fa -b -ub -ngl -t --metrics --slots --log-verbosity --cors-origins
    assert len(written) == 17


def test_the_default_command_line(gguf: Path):
    settings = llama_server_settings(model_path=str(gguf))
    assert _args(settings) == ["-m", str(gguf), "--alias", gguf.name[:-len(".gguf")], "--host", "127.0.0.1",
                               "--port", "8080", "-np", "1", "-ngl", "all", "--metrics", "--slots", "--log-verbosity", "4",
                               "--cors-origins", "localhost"]
    # The program: the one the engine locator finds (the bundled one, else one on PATH), else the bare name
    # for the start to look up, whichever this machine has (the engine test below pins the bundled one).
    found = engine.find_llama_server()
    assert tuning.command(settings)[0] == (str(found) if found is not None else "llama-server")
    chosen = settings.with_options(binary="~/llama.cpp/build/bin/llama-server")
    assert tuning.command(chosen) == [str(Path.home() / "llama.cpp/build/bin/llama-server"), *_args(chosen)]


@pytest.mark.engine
def test_the_default_command_runs_the_bundled_llama_server(gguf: Path, llama_server_binary: Path):
    engine_dir = engine.package_dir(engine.ENGINE_PACKAGE)
    assert engine_dir is not None and llama_server_binary == engine_dir / "bin" / "llama-server"
    settings = llama_server_settings(model_path=str(gguf))
    assert tuning.command(settings)[0] == tuning.binary(settings) == str(llama_server_binary)


def test_the_served_model_is_named_by_its_file_unless_an_extra_line_names_it(gguf: Path):
    assert tuning.model_alias("/models/Qwen3-14B-Q4_K_M.gguf") == "Qwen3-14B-Q4_K_M"
    assert tuning.model_alias("/models/weights.bin") == "weights.bin"
    own = llama_server_settings(model_path=str(gguf)).replace(extra_settings="-a mine")
    assert _value_of(_args(own), "-a") == "mine" and "--alias" not in _args(own)


def test_context_is_per_slot_so_the_total_is_context_times_parallel(gguf: Path):
    for parallel, per_slot in ((1, 2048), (2, 2048), (4, 8192), (8, 32768)):
        settings = llama_server_settings(ServerSettings(num_parallel=parallel, context_length=per_slot),
                                         model_path=str(gguf))
        args = _args(settings)
        assert _value_of(args, "-np") == str(parallel)
        assert _value_of(args, "-c") == str(per_slot * parallel)
    assert "-c" not in _args(llama_server_settings(model_path=str(gguf)))  # default: the model's, shared
    assert "× parallel" in LLAMA_SERVER_TUNING.texts.context_hint


def test_kv_cache_flash_batches_layers_and_threads_map_to_their_flags(gguf: Path):
    base = llama_server_settings(model_path=str(gguf))
    q8 = _args(base.replace(kv_cache_type="q8_0"))
    assert _value_of(q8, "-ctk") == "q8_0" and _value_of(q8, "-ctv") == "q8_0"
    assert "-ctk" not in _args(base)
    for mode in ("on", "off"):
        assert _value_of(_args(base.replace(flash_attention=mode)), "-fa") == mode
    assert "-fa" not in _args(base)
    batches = _args(base.replace(batch_size=4096, micro_batch_size=1024))
    assert _value_of(batches, "-b") == "4096" and _value_of(batches, "-ub") == "1024"
    assert _value_of(_args(base.with_options(n_gpu_layers=0)), "-ngl") == "0"
    assert _value_of(_args(base.with_options(n_gpu_layers=33)), "-ngl") == "33"
    assert _value_of(_args(base.with_options(threads=2)), "-t") == "2"
    assert "-t" not in _args(base)
    assert _value_of(_args(base.replace(host="::1", port=9000)), "--port") == "9000"


def test_the_mapping_text_is_the_command_line_a_shell_runs(tmp_path: Path):
    model = tmp_path / "my models" / "qwen3 14b.gguf"
    model.parent.mkdir()
    model.write_bytes(b"GGUF" + bytes(8))
    settings = llama_server_settings(ServerSettings(num_parallel=2, context_length=8192), model_path=str(model))
    lines = LLAMA_SERVER_TUNING.mapping_text(settings)
    assert all(line.endswith(" \\") for line in lines[:-1]) and not lines[-1].endswith("\\")
    joined = " ".join(line.removesuffix(" \\") for line in lines)
    assert shlex.split(joined) == tuning.command(settings)  # quoting survives the space in the path
    assert f"-m {shlex.quote(str(model))} \\" in lines and "-c 16384 \\" in lines
    unset = LLAMA_SERVER_TUNING.mapping_text(llama_server_settings())
    assert unset[0] == "# Choose a GGUF model file to serve." and "-m" not in " ".join(unset[1:]).split()


def test_options_have_the_kinds_and_defaults_the_form_needs():
    kinds = {spec.name: (spec.kind, spec.default) for spec in LLAMA_SERVER_TUNING.options}
    assert kinds == {"model_path": (MODEL_FILE, ""), "n_gpu_layers": ("count", -1), "threads": ("count", 0),
                     "models_dir": ("directory", ""), "binary": ("program", "")}
    assert MODEL_FILE in OPTION_KINDS
    assert LLAMA_SERVER_TUNING.kind == "llama_server" and LLAMA_SERVER_TUNING.delivery == "flags"
    assert LLAMA_SERVER_TUNING.setting_name("num_parallel") == "-np"
    assert LLAMA_SERVER_TUNING.setting_name("models_dir") == ""  # an app preference: a folder to pick from
    assert LLAMA_SERVER_TUNING.label("model_path") == "Model file"
    with pytest.raises(TypeError, match="not a llama-server option: keep"):
        llama_server_settings(keep=1)


def test_a_managed_server_needs_a_model_file(tmp_path: Path, gguf: Path):
    unset = LLAMA_SERVER_TUNING.validate(llama_server_settings())
    assert unset.errors["model_path"] == "Choose a GGUF model file to serve."
    missing = LLAMA_SERVER_TUNING.validate(llama_server_settings(model_path=str(tmp_path / "gone.gguf")))
    assert "gone.gguf does not exist" in missing.errors["model_path"]
    garbage = tmp_path / "x.gguf"
    garbage.write_bytes(b"not a model at all")
    refused = LLAMA_SERVER_TUNING.validate(llama_server_settings(model_path=str(garbage)))
    assert f"{garbage} is not a GGUF file" in refused.errors["model_path"]
    assert "is not a file" in LLAMA_SERVER_TUNING.validate(
        llama_server_settings(model_path=str(tmp_path))).errors["model_path"]
    assert LLAMA_SERVER_TUNING.validate(llama_server_settings(model_path=str(gguf))).ok


def test_options_out_of_range_or_of_the_wrong_type_are_refused(gguf: Path):
    base = llama_server_settings(model_path=str(gguf))
    assert "between -1 (all) and 999" in LLAMA_SERVER_TUNING.validate(
        base.with_options(n_gpu_layers=-2)).errors["n_gpu_layers"]
    assert "between 0" in LLAMA_SERVER_TUNING.validate(base.with_options(threads=-1)).errors["threads"]
    assert LLAMA_SERVER_TUNING.validate(base.with_options(threads="two")).errors["threads"] == (
        "Threads must be a whole number.")
    wrong_binary = LLAMA_SERVER_TUNING.validate(base.with_options(binary="/nowhere/llama-server"))
    assert "/nowhere/llama-server does not exist or is not executable" in wrong_binary.errors["binary"]
    assert "does not exist" in LLAMA_SERVER_TUNING.validate(
        base.with_options(models_dir="/nowhere/models")).warnings["models_dir"]


def test_what_llama_server_cannot_take_says_why(gguf: Path):
    unsupported = LLAMA_SERVER_TUNING.unsupported()
    assert set(unsupported) == {"keep_alive", "max_queue"}
    assert "--sleep-idle-seconds" in unsupported["keep_alive"] and "deferred" in unsupported["max_queue"]
    assert {"--sleep-idle-seconds", "--metrics"} <= help_flags.known_flags()
    base = llama_server_settings(model_path=str(gguf))
    assert LLAMA_SERVER_TUNING.validate(base).warnings == {}
    changed = LLAMA_SERVER_TUNING.validate(base.replace(keep_alive="1h", max_queue=4))
    assert changed.ok and changed.warnings["keep_alive"].startswith("Ignored: llama-server keeps its one model")
    assert "no queue limit" in changed.warnings["max_queue"]


@pytest.mark.parametrize(("line", "expected"), [
    ("--cache-reus 256", "line 1: --cache-reus is not a llama-server flag; did you mean --cache-reuse?"),
    ("--paralel 4", "line 1: --paralel is not a llama-server flag; did you mean --parallel?"),
    ("-np 4", "line 1: -np is set by the form (parallel requests); set it there"),
    ("--parallel 4", "line 1: --parallel is set by the form (parallel requests); set it there"),
    ("--ctx-size=4096", "line 1: --ctx-size is set by the form (context length); set it there"),
    ("--no-slots", "line 1: --no-slots is set by the form (always on: the Server page reads /slots)"),
    ("--n-gpu-layers 10", "line 1: --n-gpu-layers is set by the form (GPU layers)"),
    ("--models-dir /m", "line 1: --models-dir is set by the form (model file)"),
    ("mlock", "line 1: 'mlock' is not a flag"),
])
def test_extra_flags_are_refused_with_the_reason(line: str, expected: str, gguf: Path):
    errors = LLAMA_SERVER_TUNING.validate(llama_server_settings(ServerSettings(extra_settings=line),
                                                                model_path=str(gguf))).errors
    assert expected in errors["extra_settings"]


def test_real_extra_flags_pass_and_reach_the_command_line(gguf: Path):
    extra = "# keep warm\n--no-warmup\n\n--cache-reuse 256\n--sleep-idle-seconds=300\n--alias 'my model'"
    settings = llama_server_settings(ServerSettings(extra_settings=extra), model_path=str(gguf))
    assert LLAMA_SERVER_TUNING.validate(settings).ok
    assert _args(settings)[-7:] == ["--no-warmup", "--cache-reuse", "256", "--sleep-idle-seconds", "300",
                                    "--alias", "my model"]


def test_a_refused_extra_flag_never_overrides_the_form(gguf: Path):
    settings = llama_server_settings(ServerSettings(num_parallel=2, extra_settings="-np 16\n--port 1"),
                                     model_path=str(gguf))
    args = _args(settings)
    assert args.count("-np") == 1 and _value_of(args, "-np") == "2" and "1" not in args


def test_inherited_settings_stay_out_of_the_default_binary_choice(gguf: Path, tmp_path: Path):
    program = tmp_path / "llama-server"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    mine = llama_server_settings(model_path=str(gguf), binary=str(program))
    assert tuning.command(mine)[0] == str(program) and LLAMA_SERVER_TUNING.validate(mine).ok


# Every way of writing a flag the form owns onto an extra line: the form refuses it with the field to use,
# and the command line keeps the form's one value (so the exposure check sees the address it listens on).
@pytest.mark.parametrize("extra", [
    "--cache-reuse 256 --host 0.0.0.0",
    "--no-warmup\n--cache-reuse 256 --host=0.0.0.0",
    "--no-warmup '--host' \"0.0.0.0\"",
    "--cache_reuse 256 --host 0.0.0.0 --host 0.0.0.0",
    "--alias x --host 0.0.0.0  # a comment",
])
def test_an_owned_flag_anywhere_on_a_line_is_refused_and_the_form_keeps_the_address(extra: str, gguf: Path):
    settings = llama_server_settings(ServerSettings(extra_settings=extra), model_path=str(gguf))

    validation = LLAMA_SERVER_TUNING.validate(settings)

    assert "--host is set by the form (host and port); set it there" in validation.errors["extra_settings"]
    args = _args(settings)
    assert args.count("--host") == 1 and _value_of(args, "--host") == "127.0.0.1" and "0.0.0.0" not in args
    assert not exposure_of(settings, LLAMA_SERVER_TUNING).network


@pytest.mark.parametrize(("extra", "expected"), [
    ("--no-warmup --port 80", "--port is set by the form (host and port)"),
    ("--cache-reuse 256 -np 16", "-np is set by the form (parallel requests)"),
    ("--no-warmup --api_key secret", "--api-key is not taken: ollama-deck's own requests send no API key"),
    ("--api-key-file keys.txt", "--api-key-file is not taken: ollama-deck's own requests send no API key"),
    ("--no-warmup --path /home", "--path is not taken: it serves the files of a folder"),
    ("--ssl-key-file k.pem --ssl-cert-file c.pem", "--ssl-key-file is not taken: ollama-deck talks to"),
    ("--api-prefix /v9", "--api-prefix is not taken: ollama-deck calls the API at the server's root"),
])
def test_flags_that_move_or_open_the_api_are_refused_wherever_they_stand(extra: str, expected: str, gguf: Path):
    settings = llama_server_settings(ServerSettings(extra_settings=extra), model_path=str(gguf))

    assert expected in LLAMA_SERVER_TUNING.validate(settings).errors["extra_settings"]
    flag = expected.split()[0]
    assert not set(help_flags.spellings(flag)) & set(_args(settings)[_args(settings).index("--slots"):])


def test_values_are_read_by_the_options_own_value_counts(gguf: Path):
    # --alias takes one value, whatever it looks like; --control-vector-layer-range takes two.
    extra = "--alias --host --control-vector-layer-range 1 4 --no-warmup\n--sleep-idle-seconds=300"
    settings = llama_server_settings(ServerSettings(extra_settings=extra), model_path=str(gguf))

    assert LLAMA_SERVER_TUNING.validate(settings).ok
    args = _args(settings)
    assert _value_of(args, "--alias") == "--host" and _value_of(args, "--host") == "127.0.0.1"
    tail = args[args.index("--slots") + 1:]
    assert tail[tail.index("--alias"):] == ["--alias", "--host", "--control-vector-layer-range", "1", "4",
                                           "--no-warmup", "--sleep-idle-seconds", "300"]  # no --flag=value


@pytest.mark.parametrize(("extra", "expected"), [
    ("--cache-reuse", "line 1: --cache-reuse needs a value"),
    ("--no-warmup=1", "line 1: --no-warmup takes no value"),
    ("--alias 'open", "line 1: the line has an open quote"),
    ("--no-warmup mlock", "line 1: 'mlock' is not a flag"),
])
def test_malformed_lines_say_what_is_wrong(extra: str, expected: str, gguf: Path):
    settings = llama_server_settings(ServerSettings(extra_settings=extra), model_path=str(gguf))
    assert expected in LLAMA_SERVER_TUNING.validate(settings).errors["extra_settings"]


def test_the_server_answers_only_local_web_pages_unless_an_extra_line_says_otherwise(gguf: Path):
    settings = llama_server_settings(model_path=str(gguf))
    assert _value_of(_args(settings), "--cors-origins") == "localhost"
    assert not exposure_of(settings, LLAMA_SERVER_TUNING).exposed

    for local in ("localhost", "http://127.0.0.1:3000", "http://localhost", "http://[::1]:5173"):
        mine = settings.replace(extra_settings=f"--no-warmup --cors-origins {local}")
        assert not exposure_of(mine, LLAMA_SERVER_TUNING).exposed and LLAMA_SERVER_TUNING.validate(mine).ok
        assert _args(mine).count("--cors-origins") == 1 and _value_of(_args(mine), "--cors-origins") == local


@pytest.mark.parametrize(("origins", "who"), [
    ("'*'", "any web page you open in a browser (--cors-origins '*')"),
    ("null", "any web page you open in a browser (--cors-origins null)"),
    ("https://evil.example", "web pages from https://evil.example (--cors-origins https://evil.example)"),
    ("http://127.0.0.1:3000,http://evil.example", "web pages from http://127.0.0.1:3000,http://evil.example"),
    ("http://localhost.evil.example", "web pages from http://localhost.evil.example"),
])
def test_a_cors_line_that_lets_other_sites_in_needs_the_permission(origins: str, who: str, gguf: Path):
    settings = llama_server_settings(ServerSettings(extra_settings=f"--cache-reuse 256 --cors_origins {origins}"),
                                     model_path=str(gguf))

    exposure = exposure_of(settings, LLAMA_SERVER_TUNING)
    refused = LLAMA_SERVER_TUNING.validate(settings)

    assert exposure.exposed and not exposure.network and who in exposure.refusal()
    assert "lets web pages from other sites call the server" in refused.errors["network_allowed_for"]
    allowed = settings.replace(network_allowed_for="127.0.0.1")
    assert LLAMA_SERVER_TUNING.validate(allowed).ok and exposure_of(allowed, LLAMA_SERVER_TUNING).allowed
    assert "lets web pages from other sites use the server" in LLAMA_SERVER_TUNING.validate(allowed).warnings[
        "extra_settings"]
    assert _args(allowed).count("--cors-origins") == 1 and "localhost" not in _args(allowed)
