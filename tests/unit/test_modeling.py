import time

import pytest

from pt2aws.modeling import count_parameters, load_tokenizer_and_model


def test_max_tokens_caps_at_512_follows_the_tokenizer_and_roberta_offsets():
    """The one token limit (the handler's): training, the saved tokenizer and serving use it."""
    from transformers import BertConfig, LongformerConfig, RobertaConfig

    from pt2aws.serving.handler import max_tokens

    class Tok:
        model_max_length = 128

    class NoLimitTokenizer:
        model_max_length = int(1e30)  # what tokenizers without a limit report

    assert max_tokens(RobertaConfig(max_position_embeddings=514)) == 512
    assert max_tokens(BertConfig(max_position_embeddings=512)) == 512
    assert max_tokens(BertConfig(max_position_embeddings=2048)) == 512
    assert max_tokens(RobertaConfig(max_position_embeddings=514), Tok()) == 128
    assert max_tokens(RobertaConfig(max_position_embeddings=66), NoLimitTokenizer()) == 64
    assert max_tokens(LongformerConfig(max_position_embeddings=66)) == 64


def test_tiny_roberta_tokenizer_is_real_and_roundtrips():
    texts = [f"the movie number {i} was great and the popcorn was bad" for i in range(200)]
    tok, model = load_tokenizer_and_model(
        "tiny-roberta", ["negative", "positive"], train_texts=texts, max_length=32
    )
    assert len(tok) > 50, "degenerate vocabulary (transformers 5 silent-failure case)"
    ids = tok("the movie was great")["input_ids"]
    assert ids[0] == tok.bos_token_id and ids[-1] == tok.eos_token_id
    assert tok.decode(ids, skip_special_tokens=True) == "the movie was great"
    assert model.config.id2label == {0: "negative", 1: "positive"}
    assert model.config.max_position_embeddings == 34
    assert 50_000 < count_parameters(model) < 1_000_000


def test_minilm_loads_offline_with_new_head():
    tok, model = load_tokenizer_and_model(
        "minilm-l6", ["negative", "neutral", "positive"], max_length=64
    )
    assert model.config.num_labels == 3
    # the model's limit, not the training length: a saved model serves up to 512 tokens (issue 11)
    assert tok.model_max_length == 512
    assert 22_000_000 < count_parameters(model) < 23_500_000


def test_hub_model_fails_fast_naming_offline_alternative():
    from pt2aws.errors import HubUnreachableError

    t0 = time.perf_counter()
    with pytest.raises(HubUnreachableError, match="minilm-l6"):
        load_tokenizer_and_model("FacebookAI/roberta-base", ["negative", "positive"])
    assert time.perf_counter() - t0 < 10


def test_tiny_roberta_needs_texts():
    with pytest.raises(ValueError, match="train_texts"):
        load_tokenizer_and_model("tiny-roberta", ["a", "b"])


def test_saved_tokenizer_keeps_the_model_limit_not_the_training_length(tmp_path):
    from transformers import AutoTokenizer

    tok, model = load_tokenizer_and_model("minilm-l6", ["negative", "positive"], max_length=64)
    tok.save_pretrained(tmp_path)
    # the served model reads up to 512 tokens of a 600-token review, not the 64 trained on
    assert AutoTokenizer.from_pretrained(tmp_path).model_max_length == 512


def test_tiny_roberta_sized_from_the_data_when_max_length_is_none():
    from pt2aws.data import choose_max_length

    texts = [f"the movie number {i} was " + "very " * (i % 30) + "good" for i in range(300)]
    tok, model = load_tokenizer_and_model(
        "tiny-roberta", ["a", "b"], train_texts=texts, max_length=None
    )
    chosen = choose_max_length(tok, texts, model_max_tokens=512)["max_length"]
    assert tok.model_max_length == chosen and chosen % 8 == 0
    assert model.config.max_position_embeddings == chosen + 2
