"""The offline `rules` judges: seed examples from the article, plus cases of our own that
are not paraphrases of them, positives and negatives, to show the rules generalise."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from engine.judges import rules
from engine.judges.rules import gating

TODAY = dt.datetime(2026, 1, 5, 9, 0, 0)  # a Monday


def supersedes(new: str, old: str) -> bool:
    return rules.contradiction(new, [(1, old)])["supersedes"] == [1]


def confirms(new: str, old: str) -> bool:
    return rules.contradiction(new, [(1, old)])["confirms"] == [1]


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    "a, b",
    [
        ("migrated", "migrating"),
        ("stopped", "stop"),
        ("planned", "planning"),
        ("deadlines", "deadline"),
        ("libraries", "library"),
        ("readable", "reading"),
    ],
)
def test_stem_maps_inflections_together(a, b):
    assert rules.stem(a) == rules.stem(b)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I stopped using poetry, it's uv now", ["stop", "poetry", "uv"]),
        ("Prefers code that is easy to read", ["pref", "cod", "read"]),
        ("We host on Postgres via VS Code", ["host", "postgresql", "vscode"]),
    ],
)
def test_tokens_drop_stopwords_fold_synonyms_and_names(text, expected):
    assert rules.tokens(text) == expected


# --------------------------------------------------------------------------- contradiction


@pytest.mark.parametrize(
    "old, new",
    [
        # seed examples
        ("uses PostgreSQL", "migrated to MySQL"),
        ("deadline is March 15", "deadline pushed to April 1"),
        ("I manage dependencies with poetry.", "I stopped using poetry, it's uv now."),
        ("prefers tabs", "switched to spaces"),
        # our own
        ("The team tracks tickets in Jira", "We moved our tickets from Jira to Linear"),
        ("Indent Python with 4 spaces", "Switched to 2 spaces for indentation"),
        ("User's editor is VS Code", "I use Neovim now"),
        ("Prefers dark mode", "Prefers light mode these days"),
        ("The standup is at 9:30", "Standup moved to 10:00"),
        ("Lives in London", "I no longer live in London, I moved to Berlin"),
        ("Drinks coffee every morning", "I don't drink coffee anymore"),
        ("The release is scheduled for May 3", "The release slipped to May 10"),
        ("Deploys the site to Heroku", "We migrated hosting to Fly.io"),
        ("The API is written in Flask", "Rewrote the API in FastAPI"),
        ("Design review with the UX team is on Thursday", "The design review was rescheduled to Friday"),
        ("Budget for the pilot is $5,000", "Budget for the pilot was increased to $8,000"),
        ("Always run the full test suite before pushing", "Never run the full test suite before pushing"),
        ("Uses Python 3.11 for the service", "Upgraded the service to Python 3.12"),
        ("Works at Google as an SRE", "I left Google and joined Stripe"),
        ("Our main database is MongoDB", "The main database is PostgreSQL now"),
        ("The default shell is bash", "Changed the default shell to zsh"),
        ("Chat happens on Slack", "We ditched Slack for Discord"),
        ("Tickets are tracked in Jira", "We're on Linear now for tickets"),
        ("Drinks coffee every morning", "I quit coffee."),
        # a move, a wait that ended, the other end of a scale
        ("User lives in Berlin", "I moved to Lisbon last month"),
        ("User is blocked on the security review", "The security review passed"),
        ("User prefers short answers", "I like long detailed answers now"),
        # a negation elsewhere in the sentence seals the switch rather than undoing it
        ("User uses VS Code for everything.", "I switched to Neovim last month and I'm not going back."),
        ("Manages dependencies with poetry", "Moved to uv and never looked back."),
        ("The team tracks work in Jira", "We moved to Linear, and there's no going back."),
        ("Team chats on Slack", "We switched to Discord and honestly nobody misses Slack."),
        ("Uses Emacs for everything", "I use Helix now and I don't miss Emacs at all."),
        # a device is a kind of thing the old memory named (a MacBook is a laptop)
        ("User's laptop runs Windows 11", "Got a new MacBook, now on macOS"),
        ("User's laptop runs Ubuntu", "Bought a ThinkPad, running Fedora now"),
        ("User's phone is an Android", "Got an iPhone, so I'm on iOS now"),
    ],
)
def test_contradiction_supersedes_replacements(old, new):
    assert rules.contradiction(new, [(7, old)]) == {"supersedes": [7], "confirms": []}


@pytest.mark.parametrize(
    "old, new",
    [
        # seed examples
        ("likes Python", "also uses JavaScript"),
        ("working on the study tracker", "added auth to the study tracker"),
        # our own: additive facts
        ("Uses pytest for unit tests", "Also uses Playwright for end-to-end tests"),
        ("Likes Python", "Likes Rust too"),
        ("Uses PostgreSQL for the orders service", "Uses Redis for caching sessions"),
        # progressions
        ("Working on the billing service", "Finished the invoices endpoint in the billing service"),
        ("The API is slow under load", "Added a cache in front of the API"),
        ("Working on the study tracker", "The study tracker now has auth"),
        # unrelated
        ("Prefers tabs", "Switched the database to MySQL"),
        ("Report deadline is Friday", "Meeting with Bob on Monday"),
        ("I've used Python for 10 years", "Learning Rust on weekends"),
        # same thing on the new side: agrees, does not replace
        ("Works at a startup in Berlin", "Moved to Berlin last year"),
        # several members can coexist when the contexts differ
        ("Uses vim for quick edits", "Uses VS Code for large refactors"),
        ("Likes Python", "Doesn't like Java"),
        # a value added next to the old one is not a move
        ("Deadline is March 15", "Deadline is March 15, and the demo is on March 10"),
        # a change about something else that shares a word
        ("Prefers dark chocolate", "Switched to dark mode"),
        ("The project uses PostgreSQL", "Moved the project deadline to April"),
        ("Prefers concise commit messages", "Changed the commit hook to run ruff"),
        ("Works on the mobile app", "Moved the mobile app standup to 10am"),
        ("The frontend uses React", "We replaced the date picker library in the frontend"),
        # a change cue over one slot leaves a different use of the same kind of tool alone
        ("The study tracker has a SQLite cache", "We migrated the app to MySQL"),
        # only the clause with the cue counts; "CI does it" is a reason
        ("CI runs on GitHub Actions", "Running tests before committing is no longer required, CI does it"),
        # a new laptop says nothing about the server; a denied member was never held
        ("My server runs Ubuntu", "Got a new MacBook, now on macOS"),
        ("The build server runs Linux", "Bought a new MacBook, now on macOS"),
        ("User doesn't like Java", "I switched to Kotlin and I'm not going back"),
        ("Uses vim for quick edits", "I switched to VS Code for large refactors and I'm not going back."),
        ("Likes Python", "Also started learning Rust, and I don't regret it."),
        ("Orders are stored in PostgreSQL", "For the analytics warehouse, we switched to ClickHouse"),
    ],
)
def test_contradiction_leaves_additions_progress_and_unrelated(old, new):
    assert not supersedes(new, old)


@pytest.mark.parametrize(
    "old, new",
    [
        ("prefers readable code", "likes code to be easy to read"),
        ("Lives in Berlin", "Is based in Berlin"),
        ("The deadline is March 15", "Deadline: March 15th"),
        ("Uses PostgreSQL", "Our database is Postgres"),
        ("Prefers short answers", "Likes brief replies"),
        ("Prefers tabs over spaces", "Likes tabs more than spaces"),
    ],
)
def test_contradiction_confirms_restatements(old, new):
    assert rules.contradiction(new, [(3, old)]) == {"supersedes": [], "confirms": [3]}


@pytest.mark.parametrize(
    "old, new",
    [
        ("Working on the study tracker", "Added auth to the study tracker"),  # progress
        ("Prefers tabs", "Prefers spaces"),  # a swap
        ("Deadline is March 15", "Deadline is April 1"),  # a move
        ("Likes spicy food", "Doesn't like spicy food"),  # a flip
        ("The backup job runs daily", "The backup job runs hourly now"),  # a cadence
        ("Dark mode is on in the editor", "Dark mode is off in the editor"),  # a setting
    ],
)
def test_contradiction_does_not_confirm_changes(old, new):
    assert not confirms(new, old)


def test_contradiction_sorts_mixed_candidates():
    result = rules.contradiction(
        "We migrated from PostgreSQL to MySQL",
        [
            (1, "The app stores data in PostgreSQL"),
            (2, "Prefers tabs"),
            (3, "Uses MySQL for everything"),
            (4, "Deadline is March 15"),
        ],
    )
    assert result == {"supersedes": [1], "confirms": []}


STORE = [
    "User manages dependencies with poetry.",
    "User prefers tabs for indentation.",
    "The project deadline is March 15.",
    "User likes Python.",
    "User is working on the study tracker.",
    "The app uses PostgreSQL.",
    "User lives in Berlin.",
    "Always run tests before committing.",
    "CI runs on GitHub Actions.",
    "The study tracker has a SQLite cache.",
    "Weekly sync with the team on Tuesdays.",
    "Team size is 5 engineers.",
]


@pytest.mark.parametrize(
    "new, expected",
    [
        ("I stopped using poetry, it's uv now.", [1]),
        ("Deadline got pushed to April 1.", [3]),
        ("Also picked up Rust.", []),
        ("Added auth to the study tracker.", []),
        ("We migrated the app to MySQL.", [6]),
        ("Moved the weekly sync to Thursdays.", [11]),
        ("The team grew to 7 engineers.", [12]),
        ("Running tests before committing is no longer required, CI does it.", [8]),
    ],
)
def test_contradiction_against_a_whole_store_touches_only_the_slot(new, expected):
    candidates = list(enumerate(STORE, start=1))
    assert rules.contradiction(new, candidates)["supersedes"] == expected


def test_contradiction_empty_inputs():
    assert rules.contradiction("anything", []) == {"supersedes": [], "confirms": []}
    assert rules.contradiction("", [(1, "Uses PostgreSQL")]) == {"supersedes": [], "confirms": []}


# --------------------------------------------------------------------------- confidence


@pytest.mark.parametrize(
    "content, expected",
    [
        ("I use Neovim for everything.", 1.0),
        ("We decided to deploy on Fridays.", 1.0),
        ("Never commit directly to main.", 1.0),
        ("The project deadline is June 1.", 1.0),
        ("The launch is in May.", 1.0),  # the month, not the modal
        ("I could not get the build to pass.", 1.0),  # past ability, not a hedge
        ("User manages dependencies with poetry.", 1.0),
        ("I think the staging server runs Ubuntu.", 0.7),
        ("I believe Alice owns the billing service.", 0.7),
        ("Pretty sure we pinned numpy to 1.26.", 0.7),
        ("The API probably needs pagination.", 0.5),
        ("It seems the user prefers short answers.", 0.5),
        ("I guess we'll use Docker.", 0.5),
        ("I'm considering a move to Kotlin.", 0.3),
        ("We might switch to GraphQL.", 0.3),
        ("Thinking about learning Go.", 0.3),
        ("We may need a bigger server.", 0.3),
        ("Does uv support workspaces?", 0.3),
        ("I think we probably use Redis.", 0.3),  # two hedges drop a rung
        ("Maybe I'll try Rust someday.", 0.1),
        ("Perhaps the cache is the culprit.", 0.1),
        ("Wondering whether Svelte is any good.", 0.1),
        ("thinking about maybe trying Elixir", 0.1),
    ],
)
def test_confidence_scale(content, expected):
    assert rules.confidence(content) == expected


# --------------------------------------------------------------------------- expiry


@pytest.mark.parametrize(
    "content, expected",
    [
        # seed: a wait has a natural end, 14 days out by our horizon
        ("Waiting to hear back from Alice about the API spec", "2026-01-19"),
        ("The deadline is March 15", "2026-03-15"),
        ("deadline pushed from March 15 to April 1", "2026-04-01"),
        ("This sprint we focus on the importer", "2026-01-19"),
        ("Keep the legacy endpoint until v2", "2026-04-05"),
        # our own: absolute dates
        ("Code freeze on 2026-02-10", "2026-02-10"),
        ("Conference talk on 15 April", "2026-04-15"),
        ("Submit taxes by April 15th", "2026-04-15"),
        ("Report due 3/20", "2026-03-20"),
        ("Dentist appointment on January 2", "2027-01-02"),  # passed this year: next one
        ("Visa expires 15 March 2027", "2027-03-15"),
        ("The offsite is in May", "2026-05-31"),
        # relative dates
        ("Demo is tomorrow", "2026-01-06"),
        ("Tonight's deploy needs a rollback plan", "2026-01-05"),
        ("On call this week", "2026-01-11"),
        ("The design review is next Wednesday", "2026-01-14"),
        ("Ship the invoice export by Friday", "2026-01-09"),
        ("Finish the report in two weeks", "2026-01-19"),
        ("Ship the beta by the end of the quarter", "2026-03-31"),
        ("Q2 goal: launch the mobile app", "2026-06-30"),
        ("Close the books at the end of the month", "2026-01-31"),
        ("On vacation for two weeks", "2026-01-19"),
        # dateless temporary states (horizons)
        ("Blocked on the security review", "2026-01-19"),
        ("Temporarily pinned numpy below 2.0", "2026-02-04"),
        ("Using a mock server until the real API is ready", "2026-02-04"),
        ("I have an interview coming up", "2026-01-19"),
        # a date wins over a horizon
        ("Waiting for Bob's reply until Friday", "2026-01-09"),
        # ranges end on their last day; said on a Monday, "until Monday" is next week
        ("The conference is Mar 3-5", "2026-03-05"),
        ("Hold off on deploys until Monday", "2026-01-12"),
        ("It's due in 48 hours", "2026-01-07"),
        ("Out of office until the 12th", "2026-01-12"),
        ("Ship it by Feb 29", "2028-02-29"),  # the next February 29th
    ],
)
def test_expiry_finds_the_natural_end(content, expected):
    assert rules.expiry(content, TODAY) == expected


@pytest.mark.parametrize(
    "content",
    [
        "Prefers tabs",
        "I manage dependencies with poetry.",
        "My birthday is March 15",  # yearly, not an end
        "Team standup every Monday at 10",  # recurring
        "Gym on Mondays",
        "I've used Python for 5 years",  # a past span
        "Has used vim since March 2019",
        "Since March 3 we use uv",  # a start date
        "Started at Acme on 2024-03-01",  # in the past
        "We may need more RAM",  # modal 'may', not the month
        "The weather is lovely",
        "The budget is 3/4 spent",  # a fraction, not March 4
    ],
)
def test_expiry_none_for_permanent_facts(content):
    assert rules.expiry(content, TODAY) is None


def test_expiry_accepts_a_date_and_never_returns_the_past():
    assert rules.expiry("Demo is tomorrow", TODAY.date()) == "2026-01-06"
    assert rules.expiry("Demo is tomorrow", "2026-01-05T09:00:00") == "2026-01-06"
    assert rules.expiry("Launch was on 2025-11-01", TODAY) is None


# --------------------------------------------------------------------------- gate


@pytest.mark.parametrize(
    "user, kind",
    [
        ("I manage dependencies with poetry.", "tool"),
        ("Please always answer in British English.", "instruction"),
        ("Never run migrations on Fridays.", "instruction"),
        ("We decided to go with FastAPI for the backend.", "decision"),
        ("The grant application is due on March 3.", "deadline"),
        ("I'm a data engineer at a fintech startup.", "fact"),
        ("Our CI runs on GitHub Actions.", "tool"),
        ("Switched our frontend from Vue to Svelte.", "migration"),
        ("I hate long-winded answers; keep it brief.", "preference"),
        ("Next step is to add OAuth to the dashboard.", "plan"),
        ("I'm blocked on the legal review.", "waiting"),
        ("Might try Zig sometime.", "curiosity"),
        ("My name is Priya.", "fact"),
        ("I live in Lisbon.", "fact"),
        ("We're planning to launch the beta next month.", "plan"),
        ("Meeting with the auditors on Thursday.", "deadline"),
        ("Why does my app crash when uploads exceed 10MB?", "bug"),
        ("We ended up picking Auth0 over Keycloak.", "decision"),
        ("I'll be out next week.", "deadline"),
        ("Remind me to renew the domain.", "task"),
        ("Our Stripe webhook returns 400 on retries.", "fact"),
        # imperatives about how to work are standing instructions
        ("Keep code readable.", "instruction"),
        ("Please write readable code.", "instruction"),
        ("Deploy from the release branch for now.", "instruction"),
        ("Until the CI fix lands, deploy from the release branch.", "instruction"),
        ("Keep functions small.", "instruction"),
        ("Avoid global state in the services.", "instruction"),
        ("Write docstrings for every public function.", "instruction"),
        ("Use pnpm in the frontend.", "instruction"),
        ("Stick to snake_case for file names.", "instruction"),
        ("Answer in Spanish.", "instruction"),
        ("Run the linter before every commit.", "instruction"),
        ("For now, skip the flaky integration tests.", "instruction"),
        ("Format dates as ISO 8601.", "instruction"),
        ("Call me Sam.", "instruction"),
        ("Be concise.", "instruction"),
        # what matters to the user is a preference
        ("Readable code matters to me.", "preference"),
        ("Readability of the code matters most to me.", "preference"),
        ("Please keep the code readable, I care about readability more than cleverness.", "preference"),
        ("Good documentation matters a lot to me.", "preference"),
        ("Consistency is important to us.", "preference"),
        ("We value small pull requests.", "preference"),
        # facts about the user's projects, team and tools
        ("The API spec covers the billing endpoints.", "fact"),
        ("The billing service talks to Stripe.", "fact"),
        ("The docs live in the wiki.", "fact"),
        ("The frontend talks to the API through a gateway.", "fact"),
        ("Priya leads the platform team.", "fact"),
        ("Marco is our designer.", "fact"),
        ("We're rewriting the parser in Rust.", "fact"),
        ("The team meets on Mondays.", "schedule"),
        ("The analytics job runs nightly.", "schedule"),
        ("We meet with the client every Thursday.", "schedule"),
        # progress reports
        ("I added auth to the study tracker.", "progress"),
        ("We shipped the new onboarding flow.", "progress"),
        ("Just merged the refactor of the auth module.", "progress"),
        ("Finally got the webhook handler working.", "progress"),
        ("I've implemented rate limiting in the gateway.", "progress"),
    ],
)
def test_gate_saves_durable_turns(user, kind):
    verdict = rules.gate(user, "Noted.")
    assert verdict["save"] is True
    assert kind in verdict["tags"]
    assert 1 <= verdict["importance"] <= 10
    assert verdict["content"] and len(verdict["summary"]) <= 120


@pytest.mark.parametrize(
    "user",
    [
        "Hello there!",
        "Thanks, that was really helpful!",
        "Good morning! How are you?",
        "lol nice",
        "ok cool",
        "what's 2+2",
        "What time is it in Tokyo?",
        "What's the capital of France?",
        "How do I reverse a list in Python?",
        "Convert 30 celsius to fahrenheit.",
        "Tell me a joke about cats.",
        "Can you explain what a monad is?",
        "What is 15% of 80?",
        "The weather is lovely today.",
        "What's my name?",
        # small talk, one-off questions and one-off requests, worded as imperatives too
        "Hi! How are you today?",
        "Thanks, that's all for now.",
        "What's the capital of Australia?",
        "Can you explain recursion?",
        "Please explain recursion.",
        "Never mind.",
        "Have a nice weekend!",
        "It's so hot today.",
        "Write a haiku about autumn.",
        "Write Python code to reverse a string.",
        "Write me a cover letter.",
        "Help me plan a birthday party.",
        "Summarize this article for me.",
        "Add a docstring to this function.",
        "Use simpler words in that answer.",
        "Use the first option.",
        "Rewrite that paragraph.",
        "Run the tests.",
        "Check the build.",
        "Answer the question.",
        "Make it shorter.",
        "Keep going.",
        "Keep it up!",
        "Be right back.",
        "Fixed it, thanks!",
        "Ask me anything.",
        "Explain the difference between TCP and UDP.",
    ],
)
def test_gate_skips_small_talk_and_lookups(user):
    assert rules.gate(user, "Sure!")["save"] is False


def test_gate_content_keeps_the_key_nouns():
    verdict = rules.gate("I manage dependencies with poetry.", "Noted.")
    assert verdict["content"] == "User manages dependencies with poetry."
    assert "poetry" in verdict["tags"]


@pytest.mark.parametrize(
    "user, expected",
    [
        ("I really like small pull requests.", "User really likes small pull requests."),
        ("I'm moving the API to Go.", "User is moving the API to Go."),
        ("Hi! I don't use Docker at home.", "User does not use Docker at home."),
        ("Always ask me before deleting files.", "Always ask the user before deleting files."),
    ],
)
def test_gate_content_is_third_person(user, expected):
    assert rules.gate(user, "Ok.")["content"] == expected


def test_gate_keeps_the_fix_of_a_bug():
    verdict = rules.gate(
        "Our tests fail with 'database is locked' in CI.",
        "The fix is to enable WAL mode and set a busy timeout.",
    )
    assert verdict["save"] and "bug" in verdict["tags"]
    assert "database is locked" in verdict["content"]
    assert "Fix: The fix is to enable WAL mode" in verdict["content"]


def test_gate_directive_is_tagged_and_ranked_as_an_instruction():
    verdict = rules.gate("Deploy from the release branch for now.", "Will do.")
    assert verdict["tags"][0] == "instruction"
    assert verdict["content"] == "Deploy from the release branch for now."
    assert rules.gate("Always squash before merging.", "")["importance"] >= verdict["importance"]
    assert verdict["importance"] > rules.gate("I like green tea.", "")["importance"]


@pytest.mark.parametrize(
    "higher, lower",
    [
        ("Never push directly to main.", "I'm thinking about maybe trying Rust someday."),
        ("We decided on SQLite for storage.", "I use a MacBook."),
        ("The launch deadline is June 1.", "I like green tea."),
    ],
)
def test_gate_importance_ranks_instructions_decisions_deadlines_over_curiosities(higher, lower):
    assert rules.gate(higher, "")["importance"] > rules.gate(lower, "")["importance"]


def test_gate_summary_is_cut_at_120_characters():
    user = (
        "We decided to move the whole analytics pipeline from nightly batch jobs on "
        "Airflow to streaming with Kafka and Flink, starting with the billing events "
        "and then the product usage events."
    )
    verdict = rules.gate(user, "Got it.")
    assert verdict["save"] and len(verdict["summary"]) <= 120
    assert verdict["summary"].endswith("...") and "Kafka" in verdict["content"]


# --------------------------------------------------------------------------- cluster


@pytest.mark.parametrize(
    "candidates, expected",
    [
        # seed: three wordings of 'keep code readable'
        (
            [
                (1, "Always write readable code"),
                (2, "Prefers code that is easy to read"),
                (3, "Keep code readable and clear"),
                (4, "Uses PostgreSQL"),
            ],
            [[1, 2, 3]],
        ),
        (
            [
                (1, "Answer in short sentences"),
                (2, "Prefers brief, concise answers"),
                (3, "Keep replies short"),
            ],
            [[1, 2, 3]],
        ),
        ([(1, "Uses PostgreSQL"), (2, "The database is Postgres")], [[1, 2]]),
        ([(1, "Likes dark mode"), (2, "Prefers a dark theme")], [[1, 2]]),
        ([(1, "Lives in Berlin"), (2, "Based in Berlin"), (3, "Works at a bank")], [[1, 2]]),
        ([(1, "Deploy with Docker"), (2, "Uses Docker for deployment")], [[1, 2]]),
        ([(1, "Uses uv for dependencies"), (2, "Manages packages with uv")], [[1, 2]]),
        # the same preference with different elaborations or contrasts
        (
            [
                (1, "Prefers code that is easy to read over clever one-liners"),
                (2, "Likes clear, readable code with descriptive names"),
                (3, "Prefers tabs"),
                (4, "Likes short answers"),
            ],
            [[1, 2]],
        ),
        (
            [
                (1, "Wants readable code rather than clever tricks"),
                (2, "Prefers clean code with self-documenting names"),
                (3, "Uses PostgreSQL"),
            ],
            [[1, 2]],
        ),
        (
            [
                (1, "Prefers short answers with code examples"),
                (2, "Likes brief replies over long explanations"),
                (3, "Prefers readable code"),
            ],
            [[1, 2]],
        ),
        # two groups and a loner, output sorted
        (
            [
                (9, "Prefers tabs"),
                (4, "Lives in Berlin"),
                (7, "Likes tabs"),
                (2, "Is based in Berlin"),
                (5, "Deadline is March 15"),
            ],
            [[2, 4], [7, 9]],
        ),
        # negatives: conflicting members, values or polarity never group
        ([(1, "Uses PostgreSQL"), (2, "Uses MySQL")], []),
        ([(1, "Deadline is March 15"), (2, "Deadline is April 1")], []),
        ([(1, "Prefers tabs"), (2, "Prefers spaces")], []),
        ([(1, "Always run tests before committing"), (2, "Never run tests before committing")], []),
        ([(1, "Uses Python for data analysis"), (2, "Uses Python for web scraping")], []),
        ([(1, "Prefers readable code over clever code"), (2, "Prefers short answers over long ones")], []),
        ([(1, "Prefers readable code"), (2, "Prefers readable commit messages")], []),
        ([(1, "Prefers readable code with type hints"), (2, "Likes type hints in Python")], []),
        ([(1, "Likes hiking"), (2, "Works at a bank"), (3, "Uses vim")], []),
        ([(1, "Only one memory")], []),
        ([], []),
    ],
)
def test_cluster_groups_paraphrases(candidates, expected):
    assert rules.cluster(candidates) == expected


def test_cluster_threshold_controls_looseness():
    candidates = [(1, "User prefers Python for data analysis"), (2, "Uses Python for data analysis work")]
    assert rules.cluster(candidates, threshold=0.5) == [[1, 2]]
    assert rules.cluster(candidates, threshold=0.9) == []


def test_cluster_is_deterministic_whatever_the_input_order():
    a = [(3, "Keep code readable"), (1, "Prefers readable code"), (2, "Likes tabs"), (5, "Prefers tabs")]
    assert rules.cluster(a) == rules.cluster(list(reversed(a))) == [[1, 3], [2, 5]]


def _labelled_texts() -> list[str]:
    """Every memory-like text of the labelled sets (bench/judges_cases.yaml), in order."""
    import pathlib

    import yaml

    found: list[str] = []

    def walk(node) -> None:
        if isinstance(node, str) and len(node.split()) >= 3:
            found.append(node)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(yaml.safe_load((pathlib.Path(__file__).parent.parent / "bench" / "judges_cases.yaml").read_text()))
    return list(dict.fromkeys(found))


def test_cluster_scores_only_pairs_that_share_a_word_and_finds_the_same_groups(monkeypatch):
    """A weekly compression over a few hundred memories compared every pair (LongMemEval's
    S haystacks spent 60% of their time there); pairs whose gists share no word score 0,
    so only the others are scored, and the groups are those of scoring every pair."""
    import itertools
    import random

    from engine.judges.rules import compression

    texts = _labelled_texts()
    assert len(texts) > 300
    scored = []
    pair = compression._pair
    monkeypatch.setattr(compression, "_pair", lambda a, b, c: scored.append(1) or pair(a, b, c))
    rng = random.Random(7)
    for trial in range(12):
        sample = rng.sample(texts, 60)
        sample += rng.sample(sample, 5)  # repeats: groups to find
        candidates = list(enumerate(sample, 1))
        # every other trial with embeddings: a cosine for every pair, as the engine gives
        pairs = itertools.combinations(range(1, len(sample) + 1), 2)
        similar = {p: rng.uniform(0.3, 0.9) for p in pairs} if trial % 2 else None
        scored.clear()
        found = rules.cluster(candidates, similar=similar)
        assert len(scored) < 60 * 65 / 2 / 2  # not every pair
        with monkeypatch.context() as m:
            m.setattr(compression, "_sharing", lambda t: set(itertools.combinations(sorted(t), 2)))
            assert found == rules.cluster(candidates, similar=similar), trial
        assert found, trial  # the repeated texts at least


@pytest.mark.parametrize(
    "a, b",
    [
        # one job, two cadences: merging them loses when it runs
        ("The backup job runs daily", "The backup job runs weekly"),
        ("The backup job runs hourly", "The backup job runs daily"),
        ("The backup job runs nightly", "The backup job runs weekly"),
        ("Payroll runs weekly", "Payroll runs biweekly"),
        ("The report is sent monthly", "The report is sent yearly"),
        ("The report is sent quarterly", "The report is sent monthly"),
        ("The backup job runs every day", "The backup job runs every Monday"),
        ("The backup job runs every day", "The backup job runs every week"),
        ("The report goes out every week", "The report goes out every two weeks"),
        ("The report goes out weekly", "The report goes out every other week"),
        ("The backup job runs weekly", "The backup job runs twice a week"),
        ("User swims once a week", "User swims twice a week"),
        ("User swims twice a week", "User swims three times a week"),
        ("User swims twice weekly", "User swims twice daily"),
        ("Logs rotate every hour", "Logs rotate every day"),
        ("Logs rotate every 30 minutes", "Logs rotate every 10 minutes"),
        ("User walks 10,000 steps a day", "User walks 10,000 steps a week"),
        ("The backup job runs on weekdays", "The backup job runs every day"),
        ("The backup job runs on weekdays", "The backup job runs on weekends"),
        # times of day
        ("The backup job runs in the morning", "The backup job runs in the evening"),
        ("User exercises in the morning", "User exercises at night"),
        ("User stretches every morning", "User stretches every evening"),
        # how often, without a period
        ("User always runs the tests before pushing", "User sometimes runs the tests before pushing"),
        ("User usually reviews PRs after lunch", "User rarely reviews PRs after lunch"),
        # settings and scales the contradiction judge knows as flips and opposites
        ("Dark mode is on in the editor", "Dark mode is off in the editor"),
        ("Notifications are enabled for the repo", "Notifications are disabled for the repo"),
        ("User prefers short answers", "User prefers long answers"),
        ("The staging repo is public", "The staging repo is private"),
        ("User prefers early meetings", "User prefers late meetings"),
        # told apart before too: numbers, versions, weekdays, clock times, always/never
        ("The cluster has three nodes", "The cluster has five nodes"),
        ("The service runs Python 3.11", "The service runs Python 3.12"),
        ("Standup is every Monday", "Standup is every Tuesday"),
        ("The backup job runs at 2am", "The backup job runs at 3am"),
        ("User always reviews the PR", "User never reviews the PR"),
    ],
)
def test_cluster_keeps_apart_memories_that_differ_by_a_contrasting_value(a, b):
    assert rules.similarity(a, b) == 0.0
    assert rules.cluster([(1, a), (2, b)]) == []
    # embeddings that find the two close in meaning do not merge them either
    assert rules.cluster([(1, a), (2, b)], similar={(1, 2): 0.95}) == []


@pytest.mark.parametrize(
    "a, b",
    [
        ("The backup job runs daily", "The backup job runs every day"),
        ("The backup job runs daily", "Backups run every day"),
        ("The backup job runs daily", "The backup job runs each day"),
        ("The backup job runs weekly", "The backup job runs every week"),
        ("The backup job runs weekly", "The weekly backup job"),
        ("The backup job runs monthly", "The backup job runs once a month"),
        ("The backup job runs nightly", "Backups run every night"),
        ("Logs rotate hourly", "Logs rotate every hour"),
        ("The report goes out every two weeks", "The report goes out every 2 weeks"),
        ("User swims twice a week", "User swims twice weekly"),
        ("User swims three times a week", "User swims 3 times a week"),
        ("The retro is every Friday", "The retro is on Fridays"),
        # one says more (the day, the time): the same cadence, not another one
        ("The backup job runs weekly", "The backup job runs weekly on Sundays"),
        ("The backup job runs daily", "The backup job runs daily at 2am"),
        ("User takes the pill every night at 18:00", "User takes the pill each evening at 6pm"),
        ("Standup is at 9:30 every morning", "The daily standup is at 9:30"),
        ("User walks 10,000 steps a day", "User walks ten thousand steps daily"),
        ("Rent is 1,400 euros a month", "Rent is 1400 euros monthly"),
        ("User always runs the tests before pushing", "User runs the tests before pushing"),
    ],
)
def test_cluster_still_groups_paraphrases_of_one_cadence(a, b):
    assert rules.cluster([(1, a), (2, b)]) == [[1, 2]]


@pytest.mark.parametrize(
    "a, b",
    [
        ("Payroll runs biweekly", "Payroll runs every other week"),
        ("Payroll runs fortnightly", "Payroll runs every two weeks"),
        ("The audit is yearly", "The audit happens once a year"),
        ("The audit is quarterly", "The audit happens every 3 months"),
        ("User works from home 3 days a week", "User works from home three times weekly"),
        ("User takes the pill each evening", "User takes the pill nightly"),
    ],
)
def test_cluster_reads_one_cadence_in_any_notation(a, b):
    # too few words in common to group by words alone; embeddings that find them close do
    # group them, as the cadences agree however they are written
    assert rules.cluster([(1, a), (2, b)], similar={(1, 2): 0.9}) == [[1, 2]]


def test_cluster_groups_each_cadence_with_its_own_paraphrases():
    candidates = [
        (1, "The backup job runs daily"),
        (2, "The backup job runs weekly"),
        (3, "Backups run every day"),
        (4, "The backup job runs every week"),
        (5, "The backup job runs hourly"),
    ]
    assert rules.cluster(candidates) == [[1, 3], [2, 4]]


# --------------------------------------------------------------------------- merge


def test_merge_keeps_the_most_informative_wording():
    merged = rules.merge(
        ["Prefers code that is easy to read", "Always write readable code", "Keep code readable and clear"]
    )
    assert merged["content"] == "Always write readable code."
    assert merged["summary"] == merged["content"]
    assert "readable" in merged["tags"]


def test_merge_does_not_lose_distinct_facts():
    merged = rules.merge(["Uses PostgreSQL", "Our database is Postgres 16 on RDS", "Uses PostgreSQL"])
    assert "RDS" in merged["content"] and "16" in merged["content"]
    assert "postgresql" in merged["tags"]


def test_merge_appends_members_that_add_words():
    merged = rules.merge(["Prefers short answers", "Prefers short answers with code examples"])
    assert merged["content"] == "Prefers short answers with code examples."
    merged = rules.merge(["Lives in Berlin", "Based in Berlin, near Kreuzberg"])
    assert "Kreuzberg" in merged["content"]


def test_merge_summary_fits_and_empty_is_safe():
    long = [
        "Deploys every service with Docker Compose on a single Hetzner box in Falkenstein "
        "and backs up the volumes nightly to object storage with restic and rclone"
    ] * 2
    assert len(rules.merge(long)["summary"]) <= 120
    assert rules.merge([]) == {"content": "", "summary": "", "tags": []}


# --------------------------------------------------------------------------- select

MEMORIES = [
    (1, "User stopped using poetry, it's uv now."),
    (2, "Prefers tabs for indentation"),
    (3, "The project deadline is March 15"),
    (4, "Our database is PostgreSQL 16"),
    (5, "Edits code in Neovim"),
    (6, "Uses ruff for linting"),
    (7, "Demo for the client on Friday"),
    (8, "Prefers code that is easy to read"),
    (9, "Deploys the API to Fly.io"),
]


@pytest.mark.parametrize(
    "query, expected_first",
    [
        ("which dependency manager should I use in the commands?", 1),
        ("what database do we use?", 4),
        ("when is the deadline?", 3),
        ("which editor does the user like?", 5),
        ("how should I lint this file?", 6),
        ("anything happening on Friday?", 7),
        ("postgres connection settings", 4),
        ("tabs or spaces?", 2),
        ("make the code more readable", 8),
        ("where do deployments go?", 9),
        ("packages to install with uv", 1),
        ("indentation style", 2),
        ("the demo for the client", 7),
    ],
)
def test_select_puts_the_fitting_memory_first(query, expected_first):
    assert rules.select(query, MEMORIES, 6)[0] == expected_first


@pytest.mark.parametrize(
    "query",
    [
        "what's the weather like?",
        "tell me a joke",
        "hello",
        "",
    ],
)
def test_select_returns_nothing_when_nothing_fits(query):
    assert rules.select(query, MEMORIES, 6) == []


PLACES = [
    (1, "User prefers tabs."),
    (2, "User moved to Lisbon last week."),
    (3, "The project deadline is March 15."),
    (4, "Our database is PostgreSQL 16"),
    (5, "The team meets on Mondays."),
    (6, "The standup moved to 10am."),
    (7, "Deploys the API to Fly.io"),
]


@pytest.mark.parametrize(
    "query",
    [
        "what city does the user live in?",
        "where do I live now?",
        "where is the user based?",
        "which country am I in?",
        "what's my home town?",
    ],
)
def test_select_a_place_question_finds_where_the_user_moved(query):
    assert rules.select(query, PLACES, 6)[0] == 2


@pytest.mark.parametrize(
    "query, expected_first",
    [
        ("when does the team meet?", 5),
        ("when is the standup?", 6),
        ("where do deployments go?", 7),  # a place for a thing, not for the user
    ],
)
def test_select_question_words_do_not_pull_in_unrelated_memories(query, expected_first):
    picked = rules.select(query, PLACES, 6)
    assert picked[0] == expected_first and 2 not in picked


@pytest.mark.parametrize(
    "query",
    [
        "what do you know about me?",
        "tell me about myself",
        "what have you learned about me so far?",
        "what do you remember?",
    ],
)
def test_select_a_broad_question_about_the_user_returns_the_top_candidates(query):
    picked = rules.select(query, PLACES, 3)
    assert picked == [1, 2, 4]  # about the user first, in the given order
    assert rules.select(query, PLACES, 10)[:3] == [1, 2, 4]
    assert len(rules.select(query, PLACES, 10)) == len(PLACES)


@pytest.mark.parametrize(
    "query",
    [
        "what do you know about Rust?",
        "where is the bathroom?",
        "what time is it?",
        "when was the Eiffel tower built?",
    ],
)
def test_select_broad_and_question_rules_stay_quiet_off_topic(query):
    assert rules.select(query, PLACES, 6) == []


def test_select_counts_a_slot_word_once():
    candidates = [
        (1, "Tickets are tracked in Jira"),
        (2, "User is working on the study tracker"),
        (3, "The study tracker has a SQLite cache"),
    ]
    assert rules.select("tell me about the study tracker", candidates, 3)[:2] == [2, 3]


def test_select_uses_stance_only_for_preference_queries():
    candidates = [(1, "Prefers tabs"), (2, "Lives in Berlin"), (3, "Likes short answers")]
    assert rules.select("what are the user's preferences?", candidates, 5) == [1, 3]
    assert rules.select("what's the weather like?", candidates, 5) == []


def test_select_respects_top_n_and_edge_cases():
    many = [(i, f"Note {i} about the billing service") for i in range(1, 10)]
    assert rules.select("billing service", many, 3) == [1, 2, 3]  # ties keep input order
    assert rules.select("billing", many, 0) == []
    assert rules.select("billing", [], 5) == []


def test_select_ranks_rare_words_above_common_ones():
    candidates = [
        (1, "The project uses Python"),
        (2, "The project has a Kafka cluster"),
        (3, "The project is called Atlas"),
    ]
    assert rules.select("project kafka topics", candidates, 3)[0] == 2


def test_select_drops_weak_matches_far_below_the_best():
    candidates = [
        (1, "Uses pytest for unit tests with fixtures and pytest-xdist"),
        (2, "Unit conversion table lives in utils"),
    ]
    assert rules.select("pytest fixtures", candidates, 6) == [1]


# --------------------------------------------------------------------------- extract_cells


@pytest.mark.parametrize(
    "user, kind, scene",
    [
        ("We decided to use SQLite for storage.", "decision", "storage"),
        ("The memory summaries could drift over time.", "risk", "summaries"),
        ("We plan to ship the importer by March 3.", "plan", "importer"),
        ("I prefer terse answers.", "preference", "answers"),
        ("Need to add retries to the webhook handler.", "task", "retries"),
        ("Our API uses FastAPI.", "fact", "web-framework"),
        ("Never store secrets in the repository.", "preference", "security"),
        ("There's a risk the migration breaks old clients.", "risk", "migration"),
        ("We will use Postgres for the analytics warehouse.", "decision", "storage"),
        ("The importer must handle CSV files with BOMs.", "task", "importer"),
        ("Let's go with Redis for the job queue.", "decision", "cache"),
        ("We'll release v2 next sprint.", "plan", "release"),
        ("I work at a logistics company in Rotterdam.", "fact", "work"),
        # a topic noun names the scene, not the first words of the sentence
        ("One risk: the scene summaries might drift over time and lose details.", "risk", "summaries"),
        ("The plan is to ship the first version by June 30.", "plan", "release"),
        ("I'm building an agent whose goal is to remember what users tell it.", "fact", "goals"),
        ("Deadline for the first version is June 30.", "fact", "schedule"),
    ],
)
def test_extract_cells_kind_and_scene(user, kind, scene):
    cells = rules.extract_cells(user, "")
    assert len(cells) == 1
    cell = cells[0]
    assert (cell["kind"], cell["scene"]) == (kind, scene)
    assert cell["content"] == user and 0 <= cell["salience"] <= 1
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", cell["scene"])


@pytest.mark.parametrize(
    "user, assistant",
    [
        ("Hi there! Thanks!", "You're welcome!"),
        ("What's the capital of France?", "Paris."),
        ("Good morning", "Good morning! How can I help?"),
        ("The sky is blue.", "Indeed."),
        ("How do I reverse a list in Python?", "Use reversed() or slicing with [::-1]."),
    ],
)
def test_extract_cells_gives_nothing_for_chatter(user, assistant):
    assert rules.extract_cells(user, assistant) == []


@pytest.mark.parametrize(
    "sentences",
    [
        [
            "The memory summaries could drift over time.",
            "Summaries should stay under 100 words.",
            "We decided to summarise each scene after every exchange.",
        ],
        ["We plan to ship the importer by March 3.", "The importer must handle CSV files."],
        [
            "We'll release v2 next sprint.",
            "The plan is to ship the first version by June 30.",
            "We pushed the launch to July.",
        ],
        [
            "We decided to use SQLite for storage.",
            "The database file lives in ~/.lethe.",
            "Let's go with Postgres for the analytics warehouse.",
        ],
        ["Our main goal is fewer stale answers.", "The aim is to never forget a user's name."],
        ["I work at a logistics company in Rotterdam.", "I changed jobs, now at a bank."],
    ],
)
def test_extract_cells_reuse_one_scene_for_one_topic_across_exchanges(sentences):
    cells = [rules.extract_cells(text, "") for text in sentences]
    assert all(len(found) == 1 for found in cells)
    assert len({found[0]["scene"] for found in cells}) == 1


def test_extract_cells_one_per_sentence_in_order():
    cells = rules.extract_cells(
        "Hi! We decided to use SQLite for storage. The memory summaries might drift. I prefer short answers.",
        "Great. Let's go with FTS5 for search.",
    )
    assert [c["kind"] for c in cells] == ["decision", "risk", "preference", "decision"]
    assert cells[0]["scene"] == "storage" and cells[3]["scene"] == "search"


def test_extract_cells_ignores_assistant_explanations():
    cells = rules.extract_cells(
        "We use Django.", "Django is a batteries-included framework. It ships an ORM."
    )
    assert [c["content"] for c in cells] == ["We use Django."]


def test_extract_cells_salience_follows_kind_emphasis_and_hedging():
    def salience(text):
        return rules.extract_cells(text, "")[0]["salience"]

    assert salience("We decided to drop Python 3.8.") > salience("Our API runs on port 8080.")
    assert salience("We must rotate the API keys.") > salience("We should rotate the API keys.")
    assert salience("We decided on Kafka.") > salience("We maybe decided on Kafka.")


# --------------------------------------------------------------------------- summarise_scene


def test_summarise_scene_orders_by_salience():
    cells = [
        {"content": "Uses SQLite", "salience": 0.4},
        {"content": "Decided to add FTS5", "salience": 0.9},
        {"content": "WAL mode is on", "salience": 0.6},
    ]
    assert rules.summarise_scene(cells) == "Decided to add FTS5. WAL mode is on. Uses SQLite."


def test_summarise_scene_skips_repeats_and_stays_under_100_words():
    cells = [
        {"content": "Prefers readable code", "salience": 0.8},
        {"content": "prefers readable code", "salience": 0.5},
    ]
    cells += [
        {"content": f"Fact number {i} about the storage layer and its many tables", "salience": 0.3}
        for i in range(30)
    ]
    summary = rules.summarise_scene(cells)
    assert summary.startswith("Prefers readable code. Fact number 0")
    assert summary.count("readable") == 1
    assert len(summary.split()) < 100


def test_summarise_scene_empty_and_oversized():
    assert rules.summarise_scene([]) == ""
    huge = {"content": " ".join(["word"] * 300), "salience": 1.0}
    assert len(rules.summarise_scene([huge]).split()) < 100


# --------------------------------------------------------------------------- helpers, public


def test_similarity_is_zero_on_conflict_and_one_on_paraphrase():
    assert rules.similarity("prefers readable code", "likes code that is easy to read") == 1.0
    assert rules.similarity("Uses PostgreSQL", "Uses MySQL") == 0.0
    assert rules.similarity("Always run tests", "Never run tests") == 0.0


def test_read_dates_skips_start_dates():
    assert rules.read_dates("From March 3 to March 10", TODAY.date()) == [dt.date(2026, 3, 10)]


@pytest.mark.parametrize(
    "memory",
    [
        "User moved from Berlin to Lisbon.",
        "We relocated from San Francisco to Austin in May.",
        "The user is now based in Oslo.",
        "I'm moving back to Porto next month.",
    ],
)
def test_select_a_place_question_reads_every_way_of_saying_a_move(memory):
    candidates = [
        (1, "User prefers tabs."),
        (2, memory),
        (3, "The standup moved to 10am."),
        (4, "We moved the database from PostgreSQL to MySQL."),
    ]
    picked = rules.select("where do I live?", candidates, 6)
    assert picked and picked[0] == 2 and 4 not in picked


# ---- issue 18: classes of failure, each with sentences of its own -------------------------
@pytest.mark.parametrize(
    "old, new",
    [
        # a tool named in both is the slot's filler, not another item
        ("User writes code in Sublime Text", "I write everything in Zed now"),
        # a month that is also a modal verb is a date ("May 21"), not a hypothetical
        ("The audit is planned for May 14", "The audit slipped to May 21"),
        # a procedure's "before" is no memory of the past; always/never name no other thing
        ("Always lint the code before opening a PR", "Never lint the code before opening a PR"),
        # a stray 'too' before an adjective, and a year word dating the change itself
        ("Our CI runs on Jenkins", "It was too slow, so we moved our CI to Buildkite this year."),
    ],
)
def test_contradiction_is_not_blocked_by_words_that_only_look_like_guards(old, new):
    assert supersedes(new, old)


@pytest.mark.parametrize(
    "old, new",
    [
        # the change acts on the object its verb names, through its own clause
        ("The mobile app uses Flutter", "We swapped the charting library in the mobile app"),
        ("Deploys go through Argo CD", "Manual sign-off is no longer needed, Argo does it"),
        # a change that names what it left behind leaves memories holding none of it
        ("The dog has skin allergies", "The vet switched the dog from kibble to raw food for its allergies"),
        # numbers counting different units are two attributes of one thing
        ("The laptop has 4 USB ports", "The laptop has 16 GB of memory"),
        # two recurring meetings with their own names and days
        ("The weekly check-in with Omar is on Mondays at 3", "The quarterly board review is on Fridays at 3"),
        # a hypothetical, even with a change verb
        ("The studio is in Leeds", "If the lease falls through we might move the studio to York instead"),
    ],
)
def test_contradiction_leaves_other_things_alone(old, new):
    assert not supersedes(new, old)


def test_contradiction_still_confirms_a_tool_under_another_spelling():
    assert confirms("The backend runs on Postgres", "The backend runs on PostgreSQL")


@pytest.mark.parametrize(
    "a, b",
    [
        ("Never ship a release without a changelog.", "Releases ship only after the changelog is written."),
        ("User can't digest gluten.", "User cannot digest gluten at all."),
        ("The weekly sync is at 4pm on Fridays.", "Weekly sync: Fridays, 16:00."),
        ("The car costs about 12000 euros.", "The car costs ~12k EUR."),
        ("The follow-up call is on Monday.", "The followup call is on Monday."),
    ],
)
def test_paraphrases_in_other_notation_or_with_double_negatives_cluster(a, b):
    assert rules.cluster([(1, a), (2, b)]) == [[1, 2]]


@pytest.mark.parametrize(
    "a, b",
    [
        ("User drinks coffee every morning.", "User doesn't drink coffee."),
        ("The car costs 12000 euros.", "The car costs 12000 dollars."),
        ("User is allergic to cats.", "User is no longer allergic to cats."),
    ],
)
def test_real_differences_still_keep_memories_apart(a, b):
    assert rules.cluster([(1, a), (2, b)]) == []


@pytest.mark.parametrize(
    "text, today, end",
    [
        ("I'm in Porto for two more weeks.", "2026-03-02", "2026-03-16"),
        ("Staying with my aunt for another four days.", "2026-03-02", "2026-03-06"),
        ("The shop is closed until the 20th for repairs.", "2026-03-02", "2026-03-20"),
        ("Jon is on leave, he's back on the 9th.", "2026-03-12", "2026-04-09"),
        ("The gala is on November 14 this year.", "2026-03-02", "2026-11-14"),
        ("The summit is on June 2 next year.", "2026-03-02", "2027-06-02"),
    ],
)
def test_expiry_reads_remaining_spans_bare_days_and_year_words(text, today, end):
    assert rules.expiry(text, today) == end


def test_expiry_does_not_read_a_count_as_a_day():
    assert rules.expiry("I ordered the 3 chairs for the office.", "2026-03-02") is None


def test_confidence_reads_the_hedge_in_the_users_own_words():
    said = "I think my dentist appointment is on Friday, not sure."
    assert rules.confidence("User's dentist appointment is on Friday.", said) <= 0.7
    # a hedge about another fact of the same turn does not lower this one
    assert rules.confidence("User uses poetry.", "I use poetry. Maybe someday I'll learn Haskell.") == 1.0


@pytest.mark.parametrize(
    "said, sure, hedged",
    [
        (
            "I might buy a new chair, not sure yet. My new monitor arrived yesterday and works great.",
            "User's new monitor arrived yesterday and works great.",
            "User might buy a new chair.",
        ),
        (
            "I think the offsite is in Porto, but I'm not certain. The team budget for the offsite "
            "was approved on Monday.",
            "The team budget for the offsite was approved on Monday.",
            "User thinks the offsite is in Porto.",
        ),
        (
            "Perhaps we should drop Jenkins someday. We moved the API tests to GitHub Actions "
            "and the tests run twice as fast.",
            "The API tests were moved to GitHub Actions and run twice as fast.",
            "Perhaps the team should drop Jenkins someday.",
        ),
    ],
)
def test_a_hedge_in_another_sentence_sharing_a_word_stays_with_its_own_fact(said, sure, hedged):
    """The sentences a memory came from are those it shares the most words with: one
    word in common ("new", "offsite", "tests") with a hedged sentence beside its own no
    longer makes a plain fact doubtful."""
    assert rules.confidence(sure, said) == 1.0
    assert rules.confidence(hedged, said) <= 0.7


@pytest.mark.parametrize(
    "user",
    [
        "The landlord increased our rent to 2100 a month.",
        "I store my tax documents in a Dropbox folder named Receipts.",
        "I do not eat shellfish.",
        "I take 5 mg of amlodipine at night.",
    ],
)
def test_gate_keeps_habits_places_and_changed_values(user):
    assert rules.gate(user, "Noted.")["save"]


@pytest.mark.parametrize("user", ["What should I eat tonight?", "Thanks, I'll take a look."])
def test_gate_still_drops_questions_and_thanks(user):
    assert not rules.gate(user, "Sure.")["save"]


@pytest.mark.parametrize(
    "user, kind",
    [
        # how often, in words: a recurring habit
        ("I've been doing yoga twice a week, which helps me relax.", "schedule"),
        ("I go to the climbing gym three times a week.", "schedule"),
        # a count spelled out is a value as much as its digits
        ("I did attend three sessions of the support group, and it helped.", "fact"),
        ("We have twelve chickens in the backyard coop.", "fact"),
        # something the user did, told with when: it happened, and a later question asks when
        ("I just signed a contract with my first client today.", "event"),
        ("I got back from a road trip to the coast with friends last week.", "event"),
        ("We adopted a rescue dog yesterday.", "event"),
    ],
)
def test_gate_keeps_counts_in_words_how_often_and_what_the_user_did(user, kind):
    verdict = rules.gate(user, "Noted.")
    assert verdict["save"] and kind in verdict["tags"]


@pytest.mark.parametrize(
    "user",
    ["I just wanted to say thanks today!", "I just checked and it works now.", "We went there yesterday."],
)
def test_gate_a_past_verb_with_a_time_alone_is_no_event(user):
    assert not rules.gate(user, "Sure.")["save"]


def test_gate_keeps_the_grounds_of_a_question_as_a_statement():
    verdict = gating.memories(
        "What time should I start my jog, considering I like to wake up at 7:30 am on Saturdays?", "Sure."
    )
    assert [m["content"] for m in verdict["memories"]] == ["User likes to wake up at 7:30 am on Saturdays."]
    # grounds that point back into the question ('my old one') keep the question whole
    whole = gating.memories("Can you recommend a good laptop, since my old one broke?", "Sure.")
    assert [m["content"] for m in whole["memories"]] == [
        "Can you recommend a good laptop, since User's old one broke?"
    ]


@pytest.mark.parametrize(
    "user, kept",
    [
        (
            "By the way, I'm thinking of moving my gym sessions to five a week, do you think that's a lot?",
            "By the way, User is thinking of moving their gym sessions to five a week.",
        ),
        (
            "I adopted a second cat last month, any tips for introducing them?",
            "User adopted a second cat last month.",
        ),
    ],
)
def test_gate_keeps_a_statement_followed_by_a_question_about_it(user, kept):
    verdict = gating.memories(user, "Sure.")
    assert [m["content"] for m in verdict["memories"]] == [kept]


def test_gate_a_question_after_a_request_keeps_nothing():
    assert not rules.gate("Can you help me with this, do you think?", "Sure.")["save"]


def test_select_how_many_prefers_the_on_topic_memory_holding_a_count():
    candidates = [
        (1, "User posts Instagram stories to share their writing process with their followers."),
        (2, "User will run a poll on Instagram asking their followers what they want to see."),
        (3, "User is now at 600 followers, a nice milestone."),
        (4, "User bought a new desk in 2023."),
    ]
    assert rules.select("How many Instagram followers do I currently have?", candidates, 6)[0] == 3
    # a year is no count
    assert rules.select("How many desks did I buy?", candidates, 6) == [4]


@pytest.mark.parametrize(
    "old, new",
    [
        # a setting said as a phrase: 'turned ... off' is 'disabled'
        (
            "Push alerts are enabled for the staging dashboard and the prod dashboard",
            "We turned off push alerts for the staging dashboard; email only now.",
        ),
        # a common verb is no use of its own: the notes tool replaced, however notes 'live'
        ("Family recipes go in Notion.", "My recipes live in Obsidian now."),
        # the user's one thing of a kind, now another
        ("User works as a teacher at Oakwood school.", "I started a new job as a nurse at St Mary."),
        ("User's dentist is Dr. Patel.", "My new dentist is Dr. Ruiz."),
    ],
)
def test_contradiction_reads_changes_said_without_a_change_verb(old, new):
    assert supersedes(new, old)


@pytest.mark.parametrize(
    "old, new",
    [
        ("Family recipes go in Notion.", "My journal lives in Obsidian now."),
        ("User has two cats.", "We got a new puppy."),
        ("User works on the app.", "I have a new idea for the app."),
    ],
)
def test_contradiction_leaves_what_a_new_thing_does_not_replace(old, new):
    assert not supersedes(new, old)


# ---- issue 18, third round: classes of failure, each with sentences of its own ------------
@pytest.mark.parametrize(
    "old, new",
    [
        # the gate writes memories in the third person: "User started ..." is "I started ..."
        ("User works as a teacher at Oakwood school.", "User started a new job as a nurse at St Mary."),
        ("User's accountant is Ms. Okafor.", "User's new accountant is Mr. Brandt."),
        ("User's car is a Honda Civic.", "User just bought a new car, a Mazda 3."),
    ],
)
def test_contradiction_reads_a_new_one_in_the_third_person(old, new):
    assert supersedes(new, old)


@pytest.mark.parametrize(
    "old, new",
    [
        ("User has two cats.", "User got a new puppy."),
        ("User works on the app.", "User has a new idea for the app."),
    ],
)
def test_contradiction_third_person_new_thing_still_replaces_only_its_kind(old, new):
    assert not supersedes(new, old)


# With embeddings, each candidate comes with its cosine to the new memory. Unrelated
# memories sit around 0.1-0.25 with all-MiniLM-L6-v2; the numbers below are of that kind.
OTHERS = [
    (2, "The quarterly review is in room 4."),
    (3, "User's brother lives in Cork."),
    (4, "The payroll runs on the 25th."),
]
FAR = {2: 0.21, 3: 0.18, 4: 0.12}


@pytest.mark.parametrize(
    "old, new",
    [
        # an ending said of a kind ("sugar", "caffeine") that the old memory names by a member
        ("User takes two spoons of honey in every tea.", "User gave up sugar entirely."),
        ("The Guardian is delivered every Saturday.", "We cancelled the newspaper subscription."),
        ("CI compiles the whole monorepo at 2am every night.", "No more overnight builds, we stopped them."),
    ],
)
def test_contradiction_an_ending_acts_on_the_clearly_nearest_memory(old, new):
    got = rules.contradiction(new, [(1, old)] + OTHERS, {1: 0.5, **FAR})
    assert got["supersedes"] == [1]


@pytest.mark.parametrize(
    "old, new, near",
    [
        # two memories equally near: which one ended is not clear, so neither is touched
        (
            "User takes two spoons of honey in every tea.",
            "User gave up sugar entirely.",
            {1: 0.5, 2: 0.46, 3: 0.18, 4: 0.12},
        ),
        # clearly nearest, but nothing said to have changed
        (
            "User takes two spoons of honey in every tea.",
            "User loves maple syrup on pancakes.",
            {1: 0.5, **FAR},
        ),
        # clearly nearest, but far in meaning
        (
            "User takes two spoons of honey in every tea.",
            "User gave up sugar entirely.",
            {1: 0.33, 2: 0.1, 3: 0.08, 4: 0.05},
        ),
    ],
)
def test_contradiction_nearest_needs_a_clear_lead_a_change_and_closeness(old, new, near):
    assert rules.contradiction(new, [(1, old)] + OTHERS, near)["supersedes"] == []


# ---- select: an abbreviation is the words it abbreviates ---------------------------------
FACTS = [
    (1, "The annual recurring revenue is about 1.2M dollars."),
    (2, "User's body mass index was 24 at the last check-up."),
    (3, "The service level agreement promises a reply within 4 hours."),
    (4, "The parcel has an estimated time of arrival of Friday."),
    (5, "Return on investment for the ads was 3x last quarter."),
    (6, "User prefers rust-coloured notebooks."),
]


@pytest.mark.parametrize(
    "query, want",
    [
        ("what's our ARR?", 1),
        ("what was my BMI", 2),
        ("what does the SLA say", 3),
        ("what's the ETA", 4),
        ("what was the ROI", 5),
    ],
)
def test_select_reads_an_abbreviation_as_the_words_it_spells(query, want):
    assert rules.select(query, FACTS, 6)[:1] == [want]


def test_select_reads_the_words_of_an_abbreviation_a_memory_uses():
    memories = [(1, "ARR is about 1.2M dollars."), (2, "User drinks coffee black.")]
    assert rules.select("annual recurring revenue", memories, 6) == [1]


@pytest.mark.parametrize("query", ["any open PRs?", "what's our NPS?", "the CFO"])
def test_select_an_abbreviation_spelled_nowhere_picks_nothing(query):
    # two letters spell too many word pairs ("prefers rust") to mean anything alone
    assert rules.select(query, FACTS, 6) == []


# ---- select with embeddings: the clearly nearest in meaning is picked ---------------------
SHELF = [
    (1, "User's partner is allergic to penicillin."),
    (2, "The hallway lamp needs a bulb."),
    (3, "User bikes to work on Tuesdays."),
    (4, "Support tickets are answered in Freshdesk."),
    (5, "The quarterly offsite is in Lisbon."),
]


def test_select_picks_the_clearly_nearest_even_when_no_word_is_shared():
    near = {1: 0.24, 2: 0.12, 3: 0.09, 4: 0.10, 5: 0.08}
    assert rules.select("which injections should we avoid", SHELF, 6, near) == [1]


def test_select_the_clearly_nearest_stands_beside_a_word_match():
    # 'support tickets' match two words of 4, but 1 is what the query means
    near = {1: 0.40, 2: 0.10, 3: 0.12, 4: 0.27, 5: 0.05}
    assert 1 in rules.select("support tickets about injections", SHELF, 6, near)


def test_select_nearest_without_a_clear_lead_adds_nothing():
    near = {1: 0.24, 2: 0.21, 3: 0.18, 4: 0.10, 5: 0.08}
    assert rules.select("which injections should we avoid", SHELF, 6, near) == []


# ---- cluster: a clipped word is the word it clips; 'daily' is 'every day' -----------------
@pytest.mark.parametrize(
    "a, b",
    [
        ("User's physio sessions are on Thursdays.", "User sees the physiotherapist on Thursdays."),
        ("User sees the physio monthly.", "User sees the physiotherapist every month."),
        ("The admin team approves refunds.", "Refunds are approved by an administrator."),
        ("User meditates daily.", "User meditates for a few minutes every day."),
        ("User flosses daily.", "User flosses every day."),
    ],
)
def test_clipped_words_and_frequency_adverbs_cluster(a, b):
    assert rules.cluster([(1, a), (2, b)]) == [[1, 2]]


@pytest.mark.parametrize(
    "a, b",
    [
        # a compound is not a clipping: 'fire' is no 'firewall', 'note' no 'notebook'
        ("The fire alarm is tested on Mondays.", "The firewall is tested on Mondays."),
        ("User keeps a note by the door.", "User keeps a notebook by the door."),
    ],
)
def test_compounds_are_no_clipped_words(a, b):
    assert rules.cluster([(1, a), (2, b)]) == []


def test_select_an_abbreviation_starts_and_ends_on_words_of_substance():
    # "User sees a ..." spells no USA: the memories' own subject and a trailing small word
    # are not what an abbreviation abbreviates
    memories = [(1, "User sees a physio on Fridays."), (2, "Mia sees a dentist in June.")]
    assert rules.select("flights to the USA", memories, 6) == []
    assert rules.select("the MSA rules", memories, 6) == []


# ---- a changed value supersedes only a value of the same subject --------------------------
# Two memories that share nothing but the value's unit ("GB of RAM"), the word "number" or
# a verb ("weighs", "costs") are about two things: the laptop's RAM is not the server's.
@pytest.mark.parametrize(
    "old, new",
    [
        # units: the thing measured is not the thing that has it
        ("The staging server has 16 GB of RAM.", "My laptop has 32 GB of RAM."),
        ("The staging server has 16 GB of RAM.", "I upgraded my laptop to 32 GB of RAM."),
        ("The rain barrel holds 200 litres.", "Our hot water tank holds 150 litres."),
        ("My road bike weighs 8 kg.", "The dog weighs 30 kg now."),
        # ids: "number 7", "service 7" and "ticket 4512" name which one
        ("Fact number 7: the port for service 7 is 807.", "I switched my editor to Helix number 2."),
        ("Service 7 listens on port 8007.", "Service 9 listens on port 8009."),
        ("Ticket 4512 is estimated at 3 points.", "Ticket 4620 got bumped to 5 points."),
        # versions and ports
        ("The mobile app is on version 2.3.", "The Android tablet got upgraded to version 14."),
        ("Our API gateway listens on port 8080.", "The metrics exporter listens on port 9100."),
        # prices
        ("The gym membership costs 40 euros a month.", "My phone plan costs 25 euros a month."),
        # counts: another office, another owner's team
        ("The Berlin office has 12 engineers.", "The Lisbon office is up to 8 engineers."),
        ("Tom's team has 6 people.", "My team has 9 people now."),
        # dates: another owner's passport, another room's renovation
        ("Sara's passport expires on 2027-04-01.", "My passport expires on 2035-06-30."),
        ("The kitchen renovation starts on May 4.", "The bathroom renovation was pushed to June 10."),
        # a change verb does not make another thing's value this one's
        ("The production server has 64 GB of RAM.", "The staging server was upgraded to 32 GB of RAM."),
        (
            "Invoice 1043 for the Kappa project is 2,400 euros.",
            "Invoice 1051 for the Kappa project was raised to 3,100 euros.",
        ),
        ("User's laptop has 8 GB of RAM.", "His laptop has 16 GB of RAM."),
    ],
)
def test_contradiction_a_value_of_another_subject_is_no_change(old, new):
    assert not supersedes(new, old)


@pytest.mark.parametrize(
    "old, new",
    [
        ("The staging server has 16 GB of RAM.", "The staging server has 32 GB of RAM now."),
        # my / the / our / user's: determiners and the user's own possessives name one thing
        ("My laptop has 8 GB of RAM.", "User's laptop was upgraded to 16 GB of RAM."),
        ("The gym membership costs 40 euros a month.", "My gym membership went up to 45 euros a month."),
        ("Our rain barrel holds 200 litres.", "The rain barrel holds 250 litres now."),
        ("The metrics exporter listens on port 9100.", "The metrics exporter moved to port 9200."),
        ("The mobile app is on version 2.3.", "The mobile app is on version 2.4 now."),
        # the same id, a new value
        ("Service 7 listens on port 8007.", "Service 7 now listens on port 8107."),
        ("Tom's team has 6 people.", "Tom's team is down to 4 people."),
        ("The kitchen renovation starts on May 4.", "The kitchen renovation was pushed to June 10."),
        ("Sara's passport expires on 2027-04-01.", "Sara's passport now expires on 2035-06-30."),
    ],
)
def test_contradiction_a_value_of_the_same_subject_still_changes(old, new):
    assert supersedes(new, old)


def test_contradiction_a_new_value_supersedes_only_its_own_subjects_memory():
    got = rules.contradiction(
        "My laptop has 32 GB of RAM now.",
        [
            (1, "The staging server has 16 GB of RAM."),
            (2, "User's laptop has 8 GB of RAM."),
            (3, "The build box has 64 GB of RAM."),
            (4, "Tom's laptop has 16 GB of RAM."),
        ],
    )
    assert got["supersedes"] == [2]


def test_contradiction_a_value_of_another_subject_is_no_change_however_close_in_meaning():
    # embeddings find "my laptop's RAM" and "the server's RAM" close: still two subjects
    got = rules.contradiction(
        "My laptop has 32 GB of RAM.", [(1, "The staging server has 16 GB of RAM.")] + OTHERS, {1: 0.8, **FAR}
    )
    assert got["supersedes"] == []
    got = rules.contradiction(
        "The staging server has 32 GB of RAM now.",
        [(1, "The staging server has 16 GB of RAM.")] + OTHERS,
        {1: 0.9, **FAR},
    )
    assert got["supersedes"] == [1]
