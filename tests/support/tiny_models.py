"""Tiny models of real architectures, built locally with transformers (random weights, seeded) and a tokenizer
trained with `tokenizers`, so that export and inference can be tested without any model hub."""

from __future__ import annotations

import json
from pathlib import Path

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "openvino runs neural networks on intel hardware",
    "paris is the capital of france and berlin is the capital of germany",
    "a small model can still be exported and served",
    "questions and answers about documents and retrieval",
] * 40

CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def _bpe_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>", "<|user|>",
                                                                       "<|assistant|>", "<|system|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_llama(folder: Path, seed: int = 0) -> Path:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    tokenizer = _bpe_tokenizer(400)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.2,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id).save_pretrained(folder)
    return folder



LORA_TARGETS = ("q_proj", "v_proj")


def write_tiny_lora(folder: Path, checkpoint: Path, seed: int = 1, rank: int = 4, scale: float = 0.5) -> Path:
    """A PEFT LoRA adapter for `checkpoint` (a Llama folder) as PEFT saves one: adapter_config.json and
    adapter_model.safetensors, with B non-zero (PEFT starts B at zero, which changes nothing) so that the adapter
    changes the model's answers. numpy and safetensors only: no torch, no peft."""
    import numpy as np
    from safetensors.numpy import save_file

    config = json.loads((checkpoint / "config.json").read_text())
    hidden = config["hidden_size"]
    head_dim = hidden // config["num_attention_heads"]
    out = {"q_proj": hidden, "v_proj": head_dim * config["num_key_value_heads"]}
    rng = np.random.default_rng(seed)
    tensors = {}
    for layer in range(config["num_hidden_layers"]):
        for target in LORA_TARGETS:
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{target}"
            tensors[f"{prefix}.lora_A.weight"] = (rng.standard_normal((rank, hidden)) * scale).astype(np.float32)
            tensors[f"{prefix}.lora_B.weight"] = (rng.standard_normal((out[target], rank)) * scale).astype(np.float32)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})
    (folder / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": str(checkpoint), "r": rank,
        "lora_alpha": 2 * rank, "lora_dropout": 0.0, "bias": "none", "target_modules": list(LORA_TARGETS),
        "fan_in_fan_out": False, "inference_mode": True}, indent=2))
    return folder

def _wordpiece_tokenizer():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertTokenizerFast

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tokenizer.train_from_iterator(CORPUS, trainer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return BertTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]",
                             cls_token="[CLS]", mask_token="[MASK]", model_max_length=128)


def _bert_config(vocab_size: int, **extra):
    from transformers import BertConfig

    return BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=128, **extra)


def build_tiny_bert_encoder(folder: Path, seed: int = 0) -> Path:
    """A sentence-transformers layout: mean pooling and normalization declared in modules.json."""
    import torch
    from transformers import BertModel

    torch.manual_seed(seed)
    tokenizer = _wordpiece_tokenizer()
    BertModel(_bert_config(len(tokenizer))).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling/config.json").write_text(json.dumps({"word_embedding_dimension": 32,
                                                              "pooling_mode_mean_tokens": True}))
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]))
    return folder


def build_tiny_cross_encoder(folder: Path, seed: int = 0) -> Path:
    import torch
    from transformers import BertForSequenceClassification

    torch.manual_seed(seed)
    tokenizer = _wordpiece_tokenizer()
    model = BertForSequenceClassification(_bert_config(len(tokenizer), num_labels=1)).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


VLM_CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>{% else %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}</s>"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_tiny_llava(folder: Path, seed: int = 0) -> Path:
    """A LLaVA of a tiny CLIP vision tower (30×30 images, 25 patches) and a tiny Llama, with its processor."""
    import torch
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    torch.manual_seed(seed)
    tokenizer = _bpe_tokenizer(400)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    tokenizer.chat_template = VLM_CHAT_TEMPLATE
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                              image_size=30, patch_size=6, projection_dim=32)
    text = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    config = LlavaConfig(vision_config=vision, text_config=text, image_seq_length=25, vision_feature_layer=-1,
                         image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
                         vision_feature_select_strategy="full")
    LlavaForConditionalGeneration(config).eval().save_pretrained(folder)
    images = CLIPImageProcessor(size={"shortest_edge": 30}, crop_size={"height": 30, "width": 30})
    LlavaProcessor(image_processor=images, tokenizer=tokenizer, patch_size=6, vision_feature_select_strategy="full",
                   chat_template=VLM_CHAT_TEMPLATE, num_additional_image_tokens=0).save_pretrained(folder)
    return folder




def with_prompts(model: Path, folder: Path, prompts: dict[str, str]) -> Path:
    """`model` (a prepared IR folder) as a model trained with prompts comes: its files linked into `folder`, and
    sentence-transformers' configuration beside them holding `prompts`."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in model.iterdir():
        (folder / path.name).symlink_to(path)
    (folder / "config_sentence_transformers.json").write_text(json.dumps({"prompts": prompts,
                                                                          "default_prompt_name": None}))
    return folder
