"""The tokenizer fallback of bench's token counts (used when a server reports no usage)."""

from __future__ import annotations

import pytest

from blackwell_stack.errors import StackError
from blackwell_stack.verify.tokens import TokenizerCounter

tokenizers = pytest.importorskip("tokenizers", reason="the tokenizer fallback needs the tokenizers package")


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from support import verify_server

    directory = tmp_path_factory.mktemp("tok")
    verify_server._train_tokenizer().save(str(directory / "tokenizer.json"))
    return directory


def test_counts_like_the_tokenizer_and_names_itself(tokenizer_dir):
    counter = TokenizerCounter(str(tokenizer_dir))  # a directory holding tokenizer.json
    text = "The capital of France is Paris."
    expected = len(tokenizers.Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json")).encode(text, add_special_tokens=False).ids)
    assert counter.count(text) == expected > 0
    assert "tokenizer.json" in counter.source and "no usage" in counter.source


def test_missing_tokenizer_says_what_to_pass(tmp_path):
    with pytest.raises(StackError) as err:
        TokenizerCounter(str(tmp_path))
    assert "--tokenizer" in err.value.hint
