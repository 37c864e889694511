"""Every tiny family: the token ids mmctx feeds equal the processor's own for the same conversation.

`processor.apply_chat_template(..., tokenize=True)` is how a family's release is meant to be
prompted; mmctx renders the template itself (it needs the text to locate option spans) and then
calls the processor, so the two must agree token for token: no second BOS after a template that
writes one, no BOS dropped where the tokenizer adds it.
"""

from __future__ import annotations

import pytest
from fixtures.conversations import few_shot, square_images, with_pixels

from mmctx.models.hf import HFBackend
from mmctx.models.tiny import FAMILIES


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return square_images(tmp_path_factory.mktemp("imgs"))


@pytest.mark.parametrize("family", FAMILIES)
def test_fed_ids_equal_the_processors_own_chat_tokenisation(family, tiny_models, images):
    backend = HFBackend(str(tiny_models[family]), device="cpu", dtype="float32")
    conversation, pictures = backend._hf_messages(few_shot(images))
    fed = backend._process([backend._template(conversation, True)], [pictures])["input_ids"][0].tolist()
    own = backend.processor.apply_chat_template(
        with_pixels(conversation, pictures), add_generation_prompt=True, tokenize=True, return_dict=True
    )["input_ids"]
    own = own.tolist() if hasattr(own, "tolist") else list(own)
    own = list(own[0]) if own and not isinstance(own[0], int) else own  # a batch of one
    assert fed == own
    bos = backend.tokenizer.bos_token_id
    assert fed[:2] != [bos, bos]  # the failure this guards against, stated plainly
