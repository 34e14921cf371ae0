"""Settings applied elsewhere reach a form without losing its user's pending edits."""

from app.core.server.applied import SettingsKeeping, carry_edits
from app.core.server.settings import ServerSettings

BEFORE = ServerSettings(num_parallel=8, context_length=4096, options=(("threads", 2),))


def test_a_form_without_edits_shows_what_was_applied():
    after = BEFORE.replace(num_parallel=4, kv_cache_type="q8_0", flash_attention="on")
    assert carry_edits(BEFORE, BEFORE, after) == after


def test_pending_edits_stay_on_top_of_what_was_applied():
    shown = BEFORE.replace(keep_alive="1h").with_options(threads=4, models_dir="/srv")
    after = BEFORE.replace(num_parallel=4)
    carried = carry_edits(shown, BEFORE, after)
    assert carried == after.replace(keep_alive="1h").with_options(threads=4, models_dir="/srv")
    removed = carry_edits(BEFORE.with_options(threads=None), BEFORE, after)
    assert removed.option("threads") is None and removed.num_parallel == 4


def test_only_saved_settings_outlive_the_session():
    assert [k.saved for k in SettingsKeeping] == [True, False, False]


def test_the_demo_and_an_unwritable_folder_keep_applied_settings_for_the_session_only():
    assert SettingsKeeping.for_session(demo=False, folder_unwritable=False) is SettingsKeeping.SAVED
    assert SettingsKeeping.for_session(demo=False, folder_unwritable=True) is SettingsKeeping.UNWRITABLE_SESSION
    # The demo never writes the user's settings, whatever the folder.
    assert SettingsKeeping.for_session(demo=True, folder_unwritable=True) is SettingsKeeping.DEMO_SESSION
    assert SettingsKeeping.for_session(demo=True, folder_unwritable=False) is SettingsKeeping.DEMO_SESSION
