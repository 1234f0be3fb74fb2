"""The playground page, used as a learner and a teacher use it, in chromium."""

# The page labels edges with the multiplication sign, `1 × 10 = 10`, and the tests look for it.
# ruff: noqa: RUF001, RUF003

from __future__ import annotations

import itertools
import re
from typing import Any
from urllib.parse import urlencode

import pytest
import requests

from browser.conftest import Visit

LESSON = "?expression=(a%2Bb)*c&a=2&b=-3&c=10"
SANITY_CHECK = (  # micrograd's test_sanity_check, as the playground's preset has it
    "x = Value(-4.0)",
    "z = 2 * x + 2 + x",
    "q = z.relu() + z * x",
    "h = (z * z).relu()",
    "y = h + q + q * x",
    "y.backward()",
)


def offers(base_url: str, path: str) -> bool:
    """Whether the service has the endpoint a panel uses; without it the panel must say so."""
    return path in requests.get(f"{base_url}/openapi.json", timeout=5).json()["paths"]


def says_it_needs(visit: Visit, message: str, path: str) -> None:
    visit.until(f"document.querySelector('{message}').textContent.includes('{path}')")
    assert visit.grad("(a+b)*c") in ("--", "1")  # the rest of the page goes on


def test_page_loads_everything_from_its_own_origin_without_errors(visit: Visit) -> None:
    visit.open()
    visit.page.wait_for_load_state("networkidle")
    assert visit.page.locator("#expression").input_value() == "(a + b) * c"
    assert visit.value("(a + b) * c") == "-10"
    assert visit.foreign_requests() == []
    assert any("/v1/graph" in r.url for r in visit.requests)
    assert any("/v1/gradients" in r.url for r in visit.requests)
    assert visit.errors == []
    # Every control has a name a screen reader can say.
    unnamed = visit.page.eval_on_selector_all(
        "button, input, select, textarea",
        """controls => controls.filter(c => !c.hidden && c.offsetParent !== null && !(
            c.getAttribute('aria-label') || c.labels?.length || c.textContent.trim()
            || c.getAttribute('aria-labelledby'))).map(c => c.outerHTML)""",
    )
    assert unnamed == []
    visit.page.locator("#predict-fields input").first.wait_for()  # the page as it settles
    visit.screenshot("playground-start.png")


def test_page_and_modules_are_served_under_a_strict_policy(base_url: str) -> None:
    page = requests.get(f"{base_url}/", timeout=5)
    assert page.headers["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    assert requests.get(f"{base_url}/playground", timeout=5).text == page.text
    scripts = re.findall(r'src="([^"]+)"', page.text)
    assert scripts and all(s.startswith("/") and not s.startswith("//") for s in scripts)
    module = requests.get(f"{base_url}{scripts[0]}", timeout=5)
    assert module.headers["Content-Type"].startswith("text/javascript")
    # Other paths keep answering with problems.
    assert requests.post(f"{base_url}/", timeout=5).headers["Content-Type"] == (
        "application/problem+json"
    )
    missing = requests.get(f"{base_url}/playground/static/nothing.js", timeout=5)
    assert missing.status_code == 404
    assert missing.headers["Content-Type"] == "application/problem+json"


def test_the_lessons_link_at_step_end_shows_the_finished_backward_pass(visit: Visit) -> None:
    visit.open(f"{LESSON}&step=end")
    assert visit.page.locator("#result").text_content() == "f = -10"
    assert visit.value("(a+b)*c") == "-10"
    assert visit.value("(a+b)") == "-1"
    assert {name: visit.grad(name) for name in ("a", "b", "c")} == {"a": "10", "b": "10", "c": "-1"}
    assert visit.grad("(a+b)*c") == "1"
    labels = visit.edge_labels()
    assert "1 × 10 = 10" in labels
    assert sorted(labels) == sorted(["1 × 10 = 10", "1 × -1 = -1", "10 × 1 = 10", "10 × 1 = 10"])
    visit.screenshot("playground.png")


def test_stepping_backward_shows_no_gradient_before_the_wave_reaches_it(visit: Visit) -> None:
    visit.open(LESSON)
    schedule = requests.post(
        f"{visit.base_url}/v1/gradients",
        json={"expression": "(a+b)*c", "bindings": {"a": 2, "b": -3, "c": 10}},
        timeout=5,
    ).json()
    titles = {0: "a", 1: "b", 2: "(a+b)", 3: "c", 4: "(a+b)*c"}
    assert set(visit.grads().values()) == {"--"}, "no gradient before the backward pass starts"
    assert visit.edge_labels() == []
    reached: set[int] = set()
    for number, step in enumerate(schedule["backward"], start=1):
        visit.page.locator("#step-forward").click()
        reached |= {step["node"], *(send["to"] for send in step["sends"])}
        grads = visit.grads()
        for node, title in titles.items():
            if node in reached:
                assert grads[title] != "--", f"step {number}: {title} was reached"
            else:
                assert grads[title] == "--", f"step {number}: {title} is not reached yet"
        expected = "end" if number == len(schedule["backward"]) else str(number)
        visit.until(f"new URLSearchParams(location.search).get('step') === '{expected}'")
    assert visit.grads() == {"a": "10", "b": "10", "(a+b)": "10", "c": "-1", "(a+b)*c": "1"}


def test_the_step_in_a_link_is_the_pass_after_that_step(visit: Visit) -> None:
    visit.open(f"{LESSON}&step=1")
    # Step 1: the output (grad 1) has sent 1 × 10 to (a+b) and 1 × -1 to c; a and b wait.
    assert visit.grads() == {"a": "--", "b": "--", "(a+b)": "10", "c": "-1", "(a+b)*c": "1"}
    assert sorted(visit.edge_labels()) == ["1 × -1 = -1", "1 × 10 = 10"]
    visit.page.locator("#final").check()
    assert visit.grads() == {"a": "10", "b": "10", "(a+b)": "10", "c": "-1", "(a+b)*c": "1"}
    # A step past the pass's end is its end, and the address says the step shown.
    visit.open(f"{LESSON}&step=99")
    assert visit.page.locator("#step-count").text_content() == "step 5 of 5"
    visit.until("new URLSearchParams(location.search).get('step') === '5'")


def test_play_runs_forward_then_backward_from_the_keyboard(visit: Visit) -> None:
    visit.open(f"{LESSON}&pass=forward")
    assert visit.value("(a+b)*c") == "--"
    visit.page.locator("#play").focus()
    visit.page.keyboard.press("Enter")
    finished = (
        "(q => q.get('step') === 'end' && !q.has('pass'))(new URLSearchParams(location.search))"
    )
    # the backward pass (no `pass` in the URL) at its end
    visit.until(finished, timeout=30)
    assert visit.grads()["a"] == "10"
    assert visit.page.locator("[data-pass=backward]").get_attribute("aria-pressed") == "true"


def test_the_graph_runs_left_to_right_and_branches_merge(visit: Visit) -> None:
    visit.open(f"{LESSON}&step=end")
    boxes = {
        title: visit.card(title).bounding_box() for title in ("a", "b", "c", "(a+b)", "(a+b)*c")
    }
    assert boxes["a"]["x"] == pytest.approx(boxes["b"]["x"], abs=2)
    assert boxes["a"]["x"] == pytest.approx(boxes["c"]["x"], abs=2)
    assert boxes["a"]["x"] < boxes["(a+b)"]["x"] < boxes["(a+b)*c"]["x"]
    # (a+b) sits between its two operands, where their arrows meet.
    assert boxes["a"]["y"] < boxes["(a+b)"]["y"] < boxes["b"]["y"] + boxes["b"]["height"]


def test_dragging_a_slider_changes_the_value(visit: Visit) -> None:
    visit.open(LESSON)
    slider = visit.page.get_by_label("Value of a", exact=True).and_(
        visit.page.locator("input[type=range]")
    )
    box = slider.bounding_box()
    y = box["y"] + box["height"] / 2
    visit.page.mouse.move(box["x"] + box["width"] * 0.6, y)  # a = 2 on -10..10
    visit.page.mouse.down()
    for fraction in (0.65, 0.7, 0.75, 0.8, 0.85, 0.9):
        visit.page.mouse.move(box["x"] + box["width"] * fraction, y, steps=3)
    visit.page.mouse.up()
    visit.until("document.querySelector('#result').textContent !== 'f = -10'")
    a = float(slider.input_value())
    assert a > 5
    expected = (a - 3) * 10
    visit.until(
        "Math.abs(parseFloat(document.querySelector('#result').textContent.slice(4)) - "
        f"{expected}) < 1e-3"
    )
    visit.until(f"Math.abs(Number(new URLSearchParams(location.search).get('a')) - {a}) < 1e-9")


def test_a_broken_expression_is_underlined_where_the_problem_is(visit: Visit) -> None:
    visit.open(LESSON)
    editor = visit.page.locator("#expression")
    editor.fill("(a + b) * * c")
    mark = visit.page.locator(".editor-mirror mark.problem")
    mark.wait_for(timeout=5_000)
    assert mark.text_content() == "*"
    start = visit.page.evaluate(
        "document.querySelector('.editor-mirror').textContent.indexOf("
        "document.querySelector('.editor-mirror mark').textContent, 9)"
    )
    assert start == 10  # the second `*`, where the problem's position points
    message = visit.page.locator("#expression-message").text_content() or ""
    assert "*" in message and len(message) > 10
    assert editor.get_attribute("aria-invalid") == "true"
    visit.screenshot("playground-error.png")
    editor.fill("(a + b) * c")
    mark.wait_for(state="detached", timeout=5_000)
    visit.until("document.querySelector('#expression-message').textContent === ''")


def test_a_link_whose_text_cannot_be_read_says_where_the_graph_will_be(visit: Visit) -> None:
    visit.page.goto(f"{visit.base_url}/?" + urlencode({"expression": "a * (b +"}))
    visit.until("document.querySelector('#expression-message').textContent !== ''")
    assert "ends after '+'" in (visit.page.locator("#expression-message").text_content() or "")
    assert "once the text can be read" in (visit.page.locator("#caption").text_content() or "")
    assert visit.page.locator("#graph .node").count() == 0


def test_a_text_being_typed_is_kept_in_the_url_with_its_values(visit: Visit) -> None:
    visit.open("?expression=a*b&a=7&b=8")
    program = "x = Value(3.0)\ny = x * a +\nz = y * b"  # a mistake on line 2, mid-edit
    visit.page.locator("#expression").fill(program)
    visit.until("document.querySelector('#expression-message').textContent !== ''")
    visit.until(f"new URLSearchParams(location.search).get('expression') === {program!r}")
    assert visit.page.evaluate("new URLSearchParams(location.search).get('a')") == "7"
    assert visit.page.evaluate("new URLSearchParams(location.search).get('b')") == "8"
    visit.page.reload()
    visit.until("document.querySelector('#expression-message').textContent !== ''")
    assert visit.page.locator("#expression").input_value() == program
    # A link to a text that does not parse keeps its values too, for when it is put right.
    visit.page.goto(f"{visit.base_url}/?" + urlencode({"expression": "a ** b", "a": 1.5, "b": 2}))
    visit.until("document.querySelector('#expression-message').textContent !== ''")
    visit.page.locator("#expression").fill("a ** 2 + b")
    visit.until("document.querySelector('#result').textContent === 'f = 4.25'")


def test_a_link_whose_values_cannot_be_computed_shows_the_graph_the_text_builds(
    visit: Visit,
) -> None:
    visit.page.goto(f"{visit.base_url}/?" + urlencode({"expression": "1/a + b", "a": 0, "b": 2}))
    visit.page.wait_for_selector("#graph .node", timeout=15_000)
    visit.until("document.querySelector('#caption').textContent !== ''")
    assert visit.grads() == {"1": "--", "a": "--", "b": "--", "1/a": "--", "1/a + b": "--"}
    assert visit.value("1/a + b") == "--"
    assert (visit.value("a"), visit.value("b")) == ("0", "2")  # the inputs' values are known
    assert "division by zero" in (visit.page.locator("#expression-message").text_content() or "")
    assert "cannot be computed" in (visit.page.locator("#caption").text_content() or "")
    # No pass to play; the panels speak for themselves: a field for each input's prediction.
    assert visit.page.locator("#play").is_disabled()
    assert visit.page.locator("#predict-fields input").count() == 2
    # At an input where it can be computed, the numbers come.
    number = visit.page.locator("#sliders .slider-number").first
    number.fill("0.5")
    number.press("Enter")
    visit.until("document.querySelector('#result').textContent === 'f = 4'")
    assert visit.value("1/a") == "2"
    assert visit.page.locator("#play").is_enabled()
    assert [error for error in visit.errors if "status of 422" not in error] == []


def test_a_text_broken_under_the_shape_of_the_last_says_that_is_what_is_shown(visit: Visit) -> None:
    visit.page.goto(f"{visit.base_url}/?" + urlencode({"expression": "1/a + b", "a": 0, "b": 2}))
    visit.until("document.querySelector('#caption').textContent.includes('cannot be computed')")
    visit.page.locator("#expression").fill("1/a + b +")
    visit.until("document.querySelector('#caption').textContent.includes('last expression')")
    assert visit.page.locator("#graph .node").count() == 5


def test_a_long_unrolled_recurrence_is_drawn_and_the_page_goes_on(visit: Visit) -> None:
    visit.open(LESSON)
    ladder = "\n".join(["y0 = a*b", *(f"y{i} = y{i - 1}*a + b" for i in range(1, 300))])
    visit.page.locator("#expression").fill(ladder)
    visit.until("document.querySelector('#result').textContent.startsWith('y299 = ')", timeout=30)
    assert visit.page.locator("#graph .node").count() == 601
    visit.page.locator("#expression").fill("(a + b) * c * 7")
    visit.until("document.querySelector('#result').textContent === 'f = -70'", timeout=30)
    assert visit.errors == []


@pytest.mark.parametrize(
    ("lang", "title", "steps", "leaf"),
    [
        ("ru", "Песочница autograd", "шаг 5 из 5", "вход"),
        ("et", "Autogradi liivakast", "samm 5 / 5", "sisend"),
    ],
)
def test_switching_language(visit: Visit, lang: str, title: str, steps: str, leaf: str) -> None:
    visit.open(f"{LESSON}&step=end")
    visit.page.locator(f"[data-lang={lang}]").click()
    assert visit.page.locator("h1").text_content() == title
    visit.until(f"document.querySelector('#step-count').textContent === '{steps}'")
    # the controls the lessons name in English keep their names: "нажми Play"
    assert visit.page.locator("#play").text_content() == "Play"
    # an input's card says so in the page's language, as the lessons speak of inputs
    tags = visit.page.eval_on_selector_all(".card-tag", "ts => ts.map(t => t.textContent)")
    assert tags.count(leaf) == 3
    assert visit.page.locator("html").get_attribute("lang") == lang
    visit.until(f"new URLSearchParams(location.search).get('lang') === '{lang}'")
    # The service is asked in the same language from now on.
    with visit.page.expect_request(lambda r: "/v1/graph" in r.url) as sent:
        visit.page.locator("#expression").fill("(a + b) * * c")
    assert sent.value.headers["accept-language"] == lang
    visit.page.locator(".editor-mirror mark.problem").wait_for()
    visit.page.locator("#expression").fill("(a + b) * c")
    visit.until("document.querySelector('#expression-message').textContent === ''")
    visit.until("!document.querySelector('#graph-frame').classList.contains('stale')")
    visit.screenshot(f"playground-{lang}.png")
    # A link with the language opens in it.
    visit.open(f"{LESSON}&lang={lang}")
    assert visit.page.locator("h1").text_content() == title


def test_a_touch_screen_is_not_told_which_keys_to_press(browser: Any, base_url: str) -> None:
    for touch, keys in [(True, False), (False, True)]:
        context = browser.new_context(
            viewport={"width": 390, "height": 844}, has_touch=touch, is_mobile=touch
        )
        page = context.new_page()
        page.goto(f"{base_url}/{LESSON}")
        page.wait_for_selector("#graph .node", timeout=15_000)
        assert ("Keys:" in page.locator(".legend").inner_text()) == keys
        context.close()


@pytest.mark.viewport(390, 844)
def test_phone_width_has_no_sideways_scroll(visit: Visit) -> None:
    visit.open(f"{LESSON}&step=end")
    assert visit.page.evaluate("document.documentElement.scrollWidth") <= 390
    # One column: the parts stack, none overlaps another or leaves the screen.
    boxes = [visit.page.locator(part).bounding_box() for part in (".inputs", ".stage", ".panels")]
    for box in boxes:
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    for above, below in itertools.pairwise(boxes):
        assert above["y"] + above["height"] <= below["y"]
    assert visit.page.locator("#graph").is_visible()
    assert "1 × 10 = 10" in visit.edge_labels()
    visit.screenshot("playground-phone.png", full_page=True)


def _in_sight(visit: Visit, title: str) -> bool:
    card, seen = visit.card(title).bounding_box(), visit.page.locator("#graph-frame").bounding_box()
    return seen["x"] <= card["x"] and card["x"] + card["width"] <= seen["x"] + seen["width"]


@pytest.mark.viewport(390, 844)
def test_at_phone_width_stepping_brings_the_step_into_sight(visit: Visit) -> None:
    # The graph is wider than a phone: its frame scrolls. The backward pass starts at the
    # output, off to the right, so that is where the frame starts.
    visit.open(f"{LESSON}&step=0")
    frame = visit.page.locator("#graph-frame")
    assert frame.evaluate("f => f.scrollWidth > f.clientWidth")
    visit.until("document.querySelector('#graph-frame').scrollLeft > 0")
    assert _in_sight(visit, "(a+b)*c") and not _in_sight(visit, "c")
    visit.page.locator("#step-forward").click()  # the output sends its gradient
    visit.until("new URLSearchParams(location.search).get('step') === '1'")
    assert _in_sight(visit, "(a+b)*c")
    visit.page.locator("#step-forward").click()
    visit.until("new URLSearchParams(location.search).get('step') === '2'")
    visit.until("document.querySelector('#graph-frame').scrollLeft === 0")
    assert _in_sight(visit, "c")
    # The forward pass computes its way to the output, and starts at the inputs.
    visit.page.locator("[data-pass=forward]").click()
    visit.page.locator("#step-forward").click()
    visit.page.locator("#step-forward").click()
    visit.until("document.querySelector('#caption').textContent.includes('done: f = -10.')")
    visit.until("document.querySelector('#graph-frame').scrollLeft > 0")
    assert _in_sight(visit, "(a+b)*c")
    visit.page.locator("#step-back").click()
    visit.page.locator("#step-back").click()
    visit.until("document.querySelector('#graph-frame').scrollLeft === 0")
    assert _in_sight(visit, "a")


def test_a_program_wider_than_the_frame_starts_the_backward_pass_at_its_output(
    visit: Visit,
) -> None:
    # micrograd's sanity check is wider than the frame at 1280 pixels: the pass starts where
    # the caption says, at the output, and the forward pass ends there, named as the program
    # names it.
    program = "\n".join(SANITY_CHECK)
    visit.open("?" + urlencode({"expression": program}))
    visit.until("document.querySelector('#graph-frame').scrollLeft > 0")
    assert _in_sight(visit, "y") and not _in_sight(visit, "x")
    visit.page.locator("[data-pass=forward]").click()
    visit.until("document.querySelector('#graph-frame').scrollLeft === 0")
    assert _in_sight(visit, "x")
    visit.open("?" + urlencode({"expression": program, "pass": "forward", "step": "end"}))
    visit.until("document.querySelector('#caption').textContent.includes('done: y = -20.')")
    visit.until("document.querySelector('#graph-frame').scrollLeft > 0")
    assert _in_sight(visit, "y")


def test_a_long_name_is_shortened_to_fit_its_card(visit: Visit) -> None:
    names = {"my_long_variable_name": 3, "another_long_name": 4}
    visit.open("?" + urlencode({"expression": " * ".join(names), **names}))
    heads = visit.page.eval_on_selector_all(
        "#graph .node.variable",
        """cards => cards.map((card) => {
            const box = (selector) => card.querySelector(selector).getBoundingClientRect();
            const [rect, title, tag] = [box('rect.card'), box('.card-title'), box('.card-tag')];
            return {
                title: card.querySelector('.card-title').textContent,
                description: card.querySelector('title').textContent,
                inside: title.left >= rect.left && title.right <= rect.right,
                clear: tag.width === 0 || title.right <= tag.left,
            };
        })""",
    )
    assert [head["title"] for head in heads] == ["my_long_vari…", "another_long…"]
    assert all(head["inside"] and head["clear"] for head in heads), heads
    assert heads[0]["description"].startswith("my_long_variable_name: value 3")


def test_a_text_that_does_not_parse_leaves_the_last_graph_titled_as_it_was(visit: Visit) -> None:
    visit.open(LESSON)
    visit.page.locator("#expression").fill("a +")
    visit.until("document.querySelector('#graph-frame').classList.contains('stale')")
    visit.page.locator("[data-lang=ru]").click()  # the cards are drawn again, in Russian
    visit.until("document.querySelector('#graph .card-tag').textContent === 'вход'")
    titles = visit.page.eval_on_selector_all(".card-title", "ts => ts.map(t => t.textContent)")
    assert titles == ["a", "b", "(a+b)", "c", "(a+b)*c"]


def test_presets_cover_the_lessons(visit: Visit) -> None:
    visit.open()
    options = visit.page.eval_on_selector_all("#preset option", "o => o.map(x => x.value)")
    assert options[:5] == ["lesson", "relu", "square", "shipping", "sanity"]
    visit.page.select_option("#preset", "square")
    visit.until("document.querySelector('#result').textContent === 'f = 9'")
    visit.page.locator("#final").check()
    assert visit.grad("a") == "6"  # both paths add up: the += of the backward pass
    assert sorted(visit.edge_labels()) == ["1 × 3 = 3", "1 × 3 = 3"]


def test_plot_panel_draws_f_and_its_derivative_over_the_slider_range(visit: Visit) -> None:
    visit.open(f"{LESSON}&panel=plot&plot=c")
    if not offers(visit.base_url, "/v1/sweep"):
        says_it_needs(visit, "#plot-message", "/v1/sweep")
        return
    plot = visit.page.locator("#plot svg.plot-svg")
    plot.wait_for(timeout=10_000)
    assert visit.page.locator("#plot-variable").input_value() == "c"
    assert plot.locator("path.series.value").count() == 1
    assert plot.locator("path.series.grad").count() == 1
    assert "c = 10" in (visit.page.locator(".plot-legend").text_content() or "")
    sweep = next(r for r in visit.requests if r.url.endswith("/v1/sweep"))
    assert sweep.post_data_json["vary"] == [{"name": "c", "from": -50, "to": 50, "points": 201}]
    visit.screenshot("playground-plot.png", full_page=True)


def test_derivatives_panel_shows_the_three_ways_side_by_side(visit: Visit) -> None:
    visit.open(LESSON)
    visit.page.get_by_role("tab", name="Three derivatives").click()
    if not offers(visit.base_url, "/v1/derivatives"):
        says_it_needs(visit, "#derivatives-message", "/v1/derivatives")
        return
    rows = visit.page.locator("table.derivatives tbody tr")
    rows.first.wait_for(timeout=15_000)
    assert rows.count() == 3
    first = rows.first.locator("td")
    assert first.nth(0).text_content() == "10"  # reverse mode
    assert (first.nth(1).locator("code").text_content() or "") == "c"  # symbolic
    assert (first.nth(2).text_content() or "").startswith("10")  # numeric, central
    assert visit.page.locator("#derivatives .agree").is_visible()
    visit.until("new URLSearchParams(location.search).get('panel') === 'derivatives'")


def test_predict_first_marks_the_learners_gradients_in_their_language(visit: Visit) -> None:
    visit.open(f"{LESSON}&lang=ru")
    visit.until("document.querySelectorAll('#predict-fields input').length === 3")
    fields = visit.page.locator("#predict-fields input")
    fields.nth(0).fill("10")
    fields.nth(1).fill("-10")
    visit.page.locator("#predict-form button[type=submit]").click()
    if not offers(visit.base_url, "/v1/check"):
        says_it_needs(visit, "#predict-message", "/v1/check")
        return
    verdicts = visit.page.locator("ul.verdicts li")
    verdicts.first.wait_for(timeout=10_000)
    classes = verdicts.evaluate_all("items => items.map(i => i.className)")
    assert classes[:2] == ["verdict correct", "verdict incorrect"]
    feedback = verdicts.nth(1).locator(".feedback").text_content() or ""
    assert re.search("[а-яё]", feedback), "the service's feedback comes back in Russian"
    # the score is of the answered gradients, and says one was left open
    assert visit.page.locator(".score").text_content() == (
        "Результат: 50% по 2 отвеченным; без ответа: 1"
    )
    # A slip that is no number is judged on its own; the other answers still are.
    fields.nth(2).fill("abc")
    visit.page.locator("#predict-form button[type=submit]").click()
    visit.until("document.querySelectorAll('ul.verdicts li.incorrect').length === 2")
    classes = verdicts.evaluate_all("items => items.map(i => i.className)")
    assert classes == ["verdict correct", "verdict incorrect", "verdict incorrect"]
    assert "abc" in (verdicts.nth(2).locator(".feedback").text_content() or "")
    assert visit.page.locator(".score").text_content() == "Результат: 33%"
    # In another language the same verdicts are given again, in it.
    visit.page.locator("[data-lang=et]").click()
    visit.until("document.querySelector('.score')?.textContent.startsWith('Tulemus')")
    assert verdicts.evaluate_all("items => items.map(i => i.className)") == classes
    assert fields.nth(2).input_value() == "abc"


def test_the_panels_tabs_follow_the_arrow_home_and_end_keys(visit: Visit) -> None:
    visit.open(LESSON)
    visit.page.get_by_role("tab", name="Predict first").focus()
    selected = "document.querySelector('[role=tab][aria-selected=true]').dataset.panel"
    for key, panel in [("ArrowRight", "plot"), ("End", "derivatives"), ("ArrowRight", "predict"),
                       ("ArrowLeft", "derivatives"), ("Home", "predict")]:  # fmt: skip
        visit.page.keyboard.press(key)
        assert visit.page.evaluate(selected) == panel, key
        assert visit.page.evaluate("document.activeElement.dataset.panel") == panel


def test_a_panel_whose_endpoint_fails_says_so_and_the_page_goes_on(visit: Visit) -> None:
    problem = {
        "type": "https://autograd-service.dev/problems/not-found",
        "title": "Not found",
        "status": 404,
        "detail": "nothing is at /v1/sweep; the API is described at /docs",
    }
    visit.page.route(
        "**/v1/sweep",
        lambda route: route.fulfill(
            status=404, content_type="application/problem+json", json=problem
        ),
    )
    visit.open(f"{LESSON}&panel=plot")
    message = visit.page.locator("#plot-message")
    visit.until("document.querySelector('#plot-message').textContent !== ''")
    assert "/v1/sweep" in (message.text_content() or "")
    assert visit.page.locator("#plot svg").count() == 0
    visit.page.locator("#step-forward").click()
    assert visit.grad("(a+b)*c") == "1"


def test_arrow_keys_step_through_the_pass(visit: Visit) -> None:
    visit.open(LESSON)
    visit.page.locator("body").click(position={"x": 5, "y": 790})
    visit.page.keyboard.press("ArrowRight")
    visit.page.keyboard.press("ArrowRight")
    visit.until("new URLSearchParams(location.search).get('step') === '2'")
    assert visit.grads()["c"] == "-1"
    visit.page.keyboard.press("ArrowLeft")
    visit.until("new URLSearchParams(location.search).get('step') === '1'")
    # with a transport button focused (after a click on it), the arrows still step
    visit.page.locator("#step-forward").click()
    visit.until("new URLSearchParams(location.search).get('step') === '2'")
    visit.page.keyboard.press("ArrowRight")
    visit.until("new URLSearchParams(location.search).get('step') === '3'")
    # and with any other button or a checkbox just clicked: the pass, final gradients
    visit.page.locator("[data-pass=forward]").click()  # the forward pass, from its step 0
    visit.until("new URLSearchParams(location.search).get('pass') === 'forward'")
    visit.page.keyboard.press("ArrowRight")
    visit.until("new URLSearchParams(location.search).get('step') === '1'")
    visit.page.locator("#final").check()
    visit.page.keyboard.press("ArrowRight")  # the second and last operation: the pass's end
    visit.until("new URLSearchParams(location.search).get('step') === 'end'")
    assert visit.page.locator("#final").is_checked()


def test_granularity_and_local_derivatives_show_what_derived_nodes_hide(visit: Visit) -> None:
    visit.open("?expression=a%20-%20b&a=5&b=2&step=end")
    assert visit.page.locator("#graph .node").count() == 3
    assert visit.page.locator(".card-expansion.shown").count() == 0
    visit.page.locator("#local").check()
    expansion = visit.page.locator(".card-expansion.shown")
    assert expansion.count() == 1
    assert "-1" in (expansion.text_content() or "")
    assert visit.grad("b") == "-1"  # the right operand of `-` gets local derivative -1
    visit.page.locator("[data-granularity=primitive]").click()
    visit.until("document.querySelectorAll('#graph .node').length === 5")
    visit.until("new URLSearchParams(location.search).get('granularity') === 'primitive'")
    assert visit.grad("b") == "-1"


def test_a_sliders_range_can_be_changed(visit: Visit) -> None:
    visit.open(LESSON)
    high = visit.page.get_by_label("Slider range of a: to")
    high.fill("100")
    high.press("Enter")
    visit.until("new URLSearchParams(location.search).get('range.a') === '-10,100'")
    slider = visit.page.locator("#sliders input[type=range]").first
    assert slider.get_attribute("max") == "100"


def test_a_typed_value_moves_its_slider_and_widens_its_range(visit: Visit) -> None:
    visit.open(LESSON)
    number = visit.page.locator("#sliders .slider-number").first
    number.fill("25")
    number.press("Enter")
    visit.until("document.querySelector('#result').textContent === 'f = 220'")
    slider = visit.page.locator("#sliders input[type=range]").first
    assert float(slider.input_value()) == 25
    assert float(slider.get_attribute("max") or 0) >= 25
    # a reversed range is not taken: its boxes show the range in force again
    low = visit.page.get_by_label("Slider range of b: from")
    low.fill("50")
    low.press("Enter")
    visit.until(
        "document.querySelector('[aria-label=\"Slider range of b: from\"]').value === '-10'"
    )


def label_overlaps(visit: Visit) -> dict[str, int]:
    """How many shown edge labels meet a card, and a derived node's expansion written under its
    card, and how many pairs of them meet each other."""
    return visit.page.evaluate(
        """() => {
            const boxes = (selector) => [...document.querySelectorAll(selector)]
                .map((element) => element.getBoundingClientRect());
            const meet = (a, b) =>
                a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
            const cards = boxes('#graph .node rect.card');
            const expansions = boxes('#graph .card-expansion.shown');
            const labels = boxes('#graph .edge-label.shown rect');
            return {
                cards: labels.filter((l) => cards.some((c) => meet(l, c))).length,
                expansions: labels.filter((l) => expansions.some((e) => meet(l, e))).length,
                labels: labels.flatMap((l, i) => labels.slice(i + 1).filter((m) => meet(l, m)))
                    .length,
            };
        }"""
    )


def test_edge_labels_grown_by_a_slider_stay_clear_of_the_cards(visit: Visit) -> None:
    visit.open(LESSON + "&step=end")
    number = visit.page.locator("#sliders .slider-number").first
    number.fill("1234.5")
    number.press("Enter")
    visit.until("document.querySelector('#result').textContent !== 'f = -10'")
    assert "1 × 1231.5 = 1231.5" in visit.edge_labels()
    assert label_overlaps(visit) == {"cards": 0, "expansions": 0, "labels": 0}


def test_labels_too_long_for_a_gap_take_two_lines_and_stay_apart(visit: Visit) -> None:
    # Four-decimal numbers make labels wider than the widest gap, and `c * c` sends two
    # gradients along edges that cross the gap at the same height.
    program = "\n".join([
        "a = Value(0.37)",
        "b = Value(-1.4637)",
        "c = a*b + a.tanh()",
        "d = c*c*b - a",
        "e = d.exp() / (1 + c)",
    ])  # fmt: skip
    visit.open("?" + urlencode({"expression": program, "step": "end"}))
    visit.until("document.querySelectorAll('#graph .edge-label.shown').length === 16")
    assert "-0.5506 × -1.4637 = 0.8058" in visit.edge_labels()  # read as one label
    two_lines = visit.page.locator("#graph .edge-label.shown text:has(tspan)")
    assert two_lines.count() > 0
    assert two_lines.first.locator("tspan").all_text_contents()[1].startswith("= ")
    assert label_overlaps(visit) == {"cards": 0, "expansions": 0, "labels": 0}
    visit.screenshot("long-edge-labels.png")


def test_a_product_of_huge_numbers_takes_a_line_per_factor(visit: Visit) -> None:
    program = "x = Value(1.5)\ny = Value(-99999.1234)\nz = Value(-123456.1234)\nw = x*y*z"
    visit.open("?" + urlencode({"expression": program, "step": "end"}))
    visit.until("document.querySelectorAll('#graph .edge-label.shown').length === 4")
    assert "-123456.1234 × -99999.1234 = 1.235e+10" in visit.edge_labels()
    lines = visit.page.locator("#graph .edge-label.shown text:has(tspan)").evaluate_all(
        "texts => texts.map(t => t.querySelectorAll('tspan').length)"
    )
    assert 3 in lines
    assert label_overlaps(visit) == {"cards": 0, "expansions": 0, "labels": 0}


@pytest.mark.parametrize("step", ["end", "4", "2"])
def test_labels_keep_off_the_expansions_written_under_derived_nodes(
    visit: Visit, step: str
) -> None:
    # The expansion of the last `-` is wider than its card and reaches into the gap where the
    # label of its edge to `a / b` is; shown with the local derivatives, it moves that label.
    query = {"expression": "(a + b) * c - a / b", "a": 1, "b": 1, "c": 1, "step": step}
    visit.open("?" + urlencode(query))
    visit.page.locator("#local").check()
    visit.until("document.querySelectorAll('#graph .card-expansion.shown').length === 2")
    expansions = visit.page.locator(".card-expansion.shown").all_text_contents()
    assert "= ((a + b) * c) + ((a / b) * -1)" in expansions
    assert label_overlaps(visit) == {"cards": 0, "expansions": 0, "labels": 0}


def test_the_error_mark_scrolls_with_a_long_line(visit: Visit) -> None:
    visit.open(LESSON)
    editor = visit.page.locator("#expression")
    editor.click()
    editor.press("End")
    editor.type(" + a" * 30 + " $ 2")
    mark = visit.page.locator(".editor-mirror mark.problem")
    mark.wait_for(timeout=5_000)
    scrolled = visit.page.evaluate("document.querySelector('#expression').scrollLeft")
    assert scrolled > 0
    visit.until(
        "document.querySelector('.editor-mirror').scrollLeft === "
        "document.querySelector('#expression').scrollLeft"
    )


def test_the_shipping_cost_preset_shows_the_lessons_program(visit: Visit) -> None:
    visit.open()
    program = requests.post(
        f"{visit.base_url}/v1/graph",
        json={"expression": "weight = Value(3.0)\ncost = weight * 15.0"},
        timeout=5,
    )
    visit.page.select_option("#preset", "shipping")
    if program.status_code != 200:  # a service without programs: the editor says why
        visit.until("document.querySelector('#expression-message').textContent !== ''")
        return
    visit.until("document.querySelector('#result').textContent === 'cost = 111'")
    inputs = visit.page.eval_on_selector_all(
        "#sliders .slider",
        "rows => rows.map(r => [r.querySelector('label').textContent, "
        "r.querySelector('.slider-number').value])",
    )
    assert inputs == [["base_fee", "50"], ["weight", "3"], ["distance", "12"], ["discount", "-8"]]
    visit.page.locator("#final").check()
    assert {name: visit.grad(name) for name in ("weight", "distance", "base_fee", "discount")} == {
        "weight": "15",
        "distance": "2",
        "base_fee": "1",
        "discount": "1",
    }


def test_the_panels_write_the_derivatives_of_the_output_the_program_names(visit: Visit) -> None:
    program = "x = Value(2.0)\nw = Value(3.0)\ncost = x * w"
    visit.open("?" + urlencode({"expression": program}))
    visit.until("document.querySelectorAll('#predict-fields input').length === 2")
    labels = visit.page.eval_on_selector_all(
        "#predict-fields label span", "spans => spans.map(s => s.textContent)"
    )
    assert labels == ["∂cost/∂x =", "∂cost/∂w ="]
    fields = visit.page.locator("#predict-fields input")
    fields.nth(0).fill("3")
    visit.page.locator("#predict-form button[type=submit]").click()
    if offers(visit.base_url, "/v1/check"):
        visit.page.locator("ul.verdicts li").first.wait_for(timeout=10_000)
        assert (visit.page.locator("ul.verdicts li strong").first.text_content() or "") == (
            "∂cost/∂x: correct"
        )
    if offers(visit.base_url, "/v1/sweep"):
        visit.page.get_by_role("tab", name="Plot").click()
        legend = visit.page.locator(".plot-legend")
        legend.wait_for(timeout=10_000)
        keys = legend.locator("span").evaluate_all("spans => spans.map(s => s.textContent)")
        assert keys[:2] == ["cost", "∂cost/∂x"]
    # A plain expression's output is f, and the labels follow the text as it changes.
    visit.page.locator("#expression").fill("a * b")
    visit.page.get_by_role("tab", name="Predict first").click()
    visit.until("document.querySelector('#predict-fields label span')?.textContent === '∂f/∂a ='")


def test_an_assignment_the_output_does_not_use_is_marked_as_a_warning(visit: Visit) -> None:
    program = "x = Value(2.0)\nu = x * 3\ny = x * x"
    visit.open("?" + urlencode({"expression": program}))
    mark = visit.page.locator(".editor-mirror mark.unused")
    mark.wait_for(timeout=5_000)
    assert mark.text_content() == "u = x * 3"
    message = visit.page.locator("#expression-message")
    assert message.text_content() == "u is assigned on line 2, but the output does not depend on it"
    assert "warning" in (message.get_attribute("class") or "")
    editor = visit.page.locator("#expression")
    assert editor.get_attribute("aria-invalid") is None  # a warning, not a problem
    assert visit.page.locator("#result").text_content() == "y = 4"
    visit.page.locator("#predict-fields input").first.wait_for()  # the page as it settles
    visit.screenshot("playground-warning.png")
    visit.page.locator("[data-lang=ru]").click()
    visit.until(
        "document.querySelector('#expression-message').textContent === "
        "'u присваивается в строке 2, но выход от него не зависит'"
    )
    # The names of a tuple assignment share its span: it is marked once, and the text under the
    # editor stays the editor's text.
    editor.fill("a, b = x, 2; c = x * 3\ny = x * x")
    visit.until("document.querySelectorAll('.editor-mirror mark.unused').length === 2")
    marks = visit.page.eval_on_selector_all(
        ".editor-mirror mark", "ms => ms.map(m => m.textContent)"
    )
    assert marks == ["a, b = x, 2", "c = x * 3"]
    mirror = visit.page.locator(".editor-mirror").text_content()
    assert mirror == editor.input_value() + "\n"
    editor.fill("x = Value(2.0)\ny = x * x")
    mark.wait_for(state="detached", timeout=5_000)
    visit.until("document.querySelector('#expression-message').textContent === ''")


def test_a_name_a_declaring_program_never_defines_is_warned_about(visit: Visit) -> None:
    # Python would stop at `wieght` (a NameError): the page gives it a slider, as any input,
    # and marks where it is read.
    program = "weight = Value(3.0)\ncost = wieght * 15.0"
    visit.open("?" + urlencode({"expression": program}))
    # (the declaration the output then does not use is marked too, as the API warns)
    mark = visit.page.locator(".editor-mirror mark.unused", has_text="wieght")
    mark.wait_for(timeout=5_000)
    assert mark.text_content() == "wieght"
    message = visit.page.locator("#expression-message").text_content() or ""
    assert message.startswith("wieght: neither declared nor assigned, so it starts at 1 here")
    assert visit.page.locator("#result").text_content() == "cost = 15"
    visit.page.locator("[data-lang=et]").click()
    visit.until(
        "document.querySelector('#expression-message').textContent.startsWith("
        "'wieght: pole deklareeritud ega omistatud')"
    )
    visit.page.locator("#expression").fill("weight = Value(3.0)\ncost = weight * 15.0")
    mark.wait_for(state="detached", timeout=5_000)


def test_a_pasted_program_runs_at_its_declared_values(visit: Visit) -> None:
    # The lesson's a = 2 and b = -3 are on the sliders; micrograd code that declares a and b
    # runs at its own values, as it would in Python, and so does an edited declaration.
    visit.open()
    visit.until("document.querySelector('#result').textContent === 'f = -10'")
    editor = visit.page.locator("#expression")
    editor.fill("a = Value(-4.0)\nb = Value(2.0)\nc = a * b")
    visit.until("document.querySelector('#result').textContent === 'c = -8'")
    editor.fill("a = Value(5.0)\nb = Value(2.0)\nc = a * b")
    visit.until("document.querySelector('#result').textContent === 'c = 10'")
    # a slider moved since keeps its value while the declaration stays as it was
    number = visit.page.locator("#sliders .slider", has_text="b").locator(".slider-number")
    number.fill("3")
    number.press("Enter")
    visit.until("document.querySelector('#result').textContent === 'c = 15'")
    editor.fill("a = Value(5.0)\nb = Value(2.0)\nc = a * b + 1")
    visit.until("document.querySelector('#result').textContent === 'c = 16'")


def test_the_api_docs_the_page_links_to_render_the_spec(visit: Visit) -> None:
    # Swagger UI reads the OpenAPI 3.1 the service serves, from the service's own files.
    visit.open()
    visit.page.locator("a.docs-link").click()
    visit.page.wait_for_selector(".opblock", timeout=15_000)
    assert "OAS 3.1" in (visit.page.locator(".info").text_content() or "")
    paths = visit.page.eval_on_selector_all(
        ".opblock-summary-path", "ps => ps.map(p => p.textContent)"
    )
    assert {"/v1/gradients", "/v1/check", "/v1/sweep"} <= set(paths)


def test_a_prediction_copied_from_the_cards_is_right_and_verdicts_go_with_their_question(
    visit: Visit,
) -> None:
    visit.open("?" + urlencode({"expression": "a / b", "a": "1", "b": "3"}))
    visit.until("document.querySelectorAll('#predict-fields input').length === 2")
    fields = visit.page.locator("#predict-fields input")
    fields.nth(0).fill("0.3333")  # 1/3 as the cards show it, to four decimals
    visit.page.locator("#predict-form button[type=submit]").click()
    if not offers(visit.base_url, "/v1/check"):
        return
    visit.until("document.querySelectorAll('ul.verdicts li.correct').length === 1")
    # Another value of b asks another question: the verdicts on the old one go.
    number = visit.page.locator("#sliders .slider", has_text="b").locator(".slider-number")
    number.fill("4")
    number.press("Enter")
    visit.until("document.querySelectorAll('ul.verdicts li').length === 0")
    assert fields.nth(0).input_value() == "0.3333"  # what was typed stays
