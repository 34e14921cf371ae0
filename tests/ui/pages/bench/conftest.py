"""The Benchmark page's fixtures, for every test module of the page."""

from tests.ui.pages.bench.test_bench_page import page_factory  # noqa: F401 - the fixture
