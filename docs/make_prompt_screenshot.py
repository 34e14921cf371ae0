"""Render docs/screenshot-prompt.png: the whole app (DeckApp) on its Prompt page after one reply in
thinking mode, streamed by the stand-in Ollama (tests/fakes) paced like Qwen3-14B on a 4090.

    QT_QPA_PLATFORM=offscreen python docs/make_prompt_screenshot.py [OUT.png]

The answer is scripted Markdown, so the image shows how a finished answer is rendered.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from shot_support import offscreen_platform  # noqa: E402 - the scripts' folder is on sys.path

os.environ.setdefault("QT_QPA_PLATFORM", offscreen_platform())
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PySide6.QtWidgets import QApplication  # noqa: E402

from app.ui.app.main import DeckApp  # noqa: E402
from app.ui.widgets.theme import apply_theme  # noqa: E402
from shot_support import pump  # noqa: E402
from tests.fakes.ollama.fake_ollama import FakeOllama  # noqa: E402

PROMPT = "小明有10个苹果，每天吃两个，请问几天吃完？ Answer in English, with a check in Python."
ANSWER = """**5 days.**

1. He starts with 10 apples.
2. He eats 2 a day, so 10 ÷ 2 = **5**.

```python
apples, per_day = 10, 2
print(apples // per_day)  # 5
```
"""



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=str(ROOT / "docs" / "screenshot-prompt.png"))
    args = ap.parse_args()
    app = QApplication.instance() or QApplication([])
    apply_theme(app)
    fake = FakeOllama(tokens_per_s=60.0, prompt_tokens_per_s=2000.0, thinking_tokens=40, answer_text=ANSWER).start()
    config = tempfile.mkdtemp(prefix="deck-shot-")
    deck = DeckApp(argparse.Namespace(config_dir=config, url=fake.url, page="console", screenshot=args.out))
    deck.window.resize(1440, 900)
    deck.window.show_page("console")
    deck.window.show()
    deck.start()
    page = deck.console_page
    try:
        if not pump(app, lambda: page.controls.model() == "qwen3:14b" and page.controls.thinking_supported, 20):
            print("the stand-in server's models never arrived", file=sys.stderr)
            return 1
        page.controls.set_think(True)
        page.prompt_edit.setPlainText(PROMPT)
        page.send()
        if not pump(app, lambda: page.run is None, 60):
            print("the reply did not finish", file=sys.stderr)
            return 1
        # the header's loaded-model line comes from /api/ps, polled every 2 s
        pump(app, lambda: "qwen3:14b" in deck.window.header.models_label.text(), 10)
        pump(app, lambda: False, 0.3)  # let the last layout settle
        ok = deck.window.grab().save(args.out)
        print(f"wrote {args.out}" if ok else f"could not write {args.out}")
        return 0 if ok else 1
    finally:
        deck.close()
        fake.stop()


if __name__ == "__main__":
    sys.exit(main())
