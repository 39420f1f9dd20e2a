"""The corpus: device errors (and other errors) as users report them.

Each case cites the public report it is modelled on; the code is rewritten small
(tiny configs, word-level tokenizer) but keeps the report's shape: the same
library calls, the same mistake, the same place it fails. ``classes`` says which
classes of issue 12 a case exercises (0: none, a baseline the package got right).
"""

from __future__ import annotations

from realworld import Case

GPT2 = """
        from transformers import GPT2Config, GPT2LMHeadModel
        from tinylib import quiet_transformers, tiny_tokenizer
        quiet_transformers()
        tokenizer = tiny_tokenizer()
        config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=32, n_positions=64,
                            bos_token_id=2, eos_token_id=3)
"""

BERT = """
        from transformers import BertConfig, BertForSequenceClassification
        from tinylib import quiet_transformers, tiny_tokenizer
        quiet_transformers()
        tokenizer = tiny_tokenizer()
        config = BertConfig(vocab_size=32, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=64, num_labels=2)
"""

LLAMA = """
        from transformers import LlamaConfig, LlamaForCausalLM
        from tinylib import quiet_transformers, tiny_tokenizer
        quiet_transformers()
        tokenizer = tiny_tokenizer()
        config = LlamaConfig(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                             bos_token_id=2, eos_token_id=3, pad_token_id=0)
"""

CASES: list[Case] = [
    # -- 1. the target comes from evidence, not from a majority of operands ------------
    Case(
        id="kv-cache-in-a-cpu-dict",
        url="https://github.com/huggingface/transformers/issues/30593",
        classes=(1,),
        setup="""
        class CachedAttention(nn.Module):
            def __init__(self, d=16):
                super().__init__()
                self.k = nn.Linear(d, d)
                self.v = nn.Linear(d, d)

            def forward(self, x, cache):
                k = torch.cat([cache['k'], self.k(x)], dim=1)
                v = torch.cat([cache['v'], self.v(x)], dim=1)
                return (x @ k.transpose(1, 2)).softmax(-1) @ v

        attn = CachedAttention().to('cuda')
        x = torch.randn(2, 1, 16, device='cuda')
        cache = {'k': torch.zeros(2, 3, 16), 'v': torch.zeros(2, 3, 16)}
        """,
        cell="out = attn(x, cache)\n",
        culprit="cache['k']",
        checks=("out",),
    ),
    Case(
        id="masked-fill-with-a-cpu-mask",
        url="https://github.com/pytorch/pytorch/pull/178684",
        classes=(1,),
        setup="""
        q = torch.randn(2, 4, 8, device='cuda')
        k = torch.randn(2, 4, 8, device='cuda')
        T = 4
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        alibi = torch.zeros(T, T)
        """,
        cell="""
        scores = q @ k.transpose(-2, -1)
        att = scores.masked_fill(~mask, float('-inf')) + alibi
        """,
        culprit="mask",
        checks=("att",),
    ),
    Case(
        id="attention-bias-and-mask-on-cpu-in-forward",
        url="https://github.com/InfiniTensor/llaisys/pull/11",
        classes=(1,),
        setup="""
        class Head(nn.Module):
            def __init__(self, d=16):
                super().__init__()
                self.qk = nn.Linear(d, d)

            def forward(self, x, mask, bias):
                scores = self.qk(x) @ x.transpose(-2, -1)
                return scores.masked_fill(mask, float('-inf')) + bias

        head = Head().to('cuda')
        x = torch.randn(2, 5, 16, device='cuda')
        mask = torch.ones(5, 5, dtype=torch.bool).triu(1)
        bias = torch.zeros(5, 5)
        """,
        cell="out = head(x, mask, bias)\n",
        culprit="mask",
        checks=("out",),
    ),
    Case(
        id="bert-inputs-on-cpu-model-on-cuda",
        url="https://github.com/cisnlp/simalign/issues/16",
        classes=(0,),
        setup=BERT
        + """
        model = BertForSequenceClassification(config).to('cuda')
        input_ids = torch.tensor([[2, 7, 8, 3], [2, 9, 10, 3]])
        attention_mask = torch.ones(2, 4, dtype=torch.long)
        token_type_ids = torch.zeros(2, 4, dtype=torch.long)
        """,
        cell="out = model(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)\n",
        culprit="input_ids",
        checks=("out",),
    ),
    Case(
        id="model-left-on-cpu-inputs-on-cuda",
        url="https://github.com/Comfy-Org/ComfyUI/issues/2363",
        classes=(1,),
        setup="""
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        x = torch.randn(4, 8, device='cuda')
        """,
        cell="out = model(x)\n",
        culprit="model",
        checks=("out",),
    ),
    # -- 2. the culprit's owner: a loss module's buffer ---------------------------------
    Case(
        id="cross-entropy-class-weights-computed-as-w",
        url="https://github.com/pytorch/pytorch/issues/122757",
        classes=(2,),
        setup="""
        counts = torch.tensor([90.0, 10.0])
        w = counts.sum() / counts
        criterion = nn.CrossEntropyLoss(weight=w)
        logits = torch.randn(8, 2, device='cuda')
        labels = torch.zeros(8, dtype=torch.long, device='cuda')
        """,
        cell="loss = criterion(logits, labels)\n",
        culprit="criterion.weight",
        checks=("loss",),
    ),
    Case(
        id="bce-pos-weight-from-label-counts",
        url="https://github.com/dmlc/dgl/issues/1840",
        classes=(2,),
        setup="""
        y_train = torch.tensor([[1.0], [0.0], [0.0], [0.0]])
        pos_weight = (y_train == 0).sum(0) / (y_train == 1).sum(0)
        loss_fcn = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
        model = nn.Linear(4, 1).to('cuda')
        x = torch.randn(4, 4, device='cuda')
        y = torch.ones(4, 1, device='cuda')
        """,
        cell="loss = loss_fcn(model(x), y)\n",
        culprit="loss_fcn.pos_weight",
        checks=("loss",),
    ),
    Case(
        id="nll-loss-weights-from-numpy",
        url="https://github.com/sacdallago/biotrainer/issues/67",
        classes=(2,),
        setup="""
        import numpy as np
        class_weights = torch.from_numpy(np.array([0.5, 2.0, 1.0], dtype=np.float32))
        loss_fn = nn.NLLLoss(weight=class_weights)
        model = nn.Sequential(nn.Linear(6, 3), nn.LogSoftmax(-1)).to('cuda')
        x = torch.randn(5, 6, device='cuda')
        y = torch.zeros(5, dtype=torch.long, device='cuda')
        """,
        cell="loss = loss_fn(model(x), y)\n",
        culprit="loss_fn.weight",
        checks=("loss",),
    ),
    Case(
        id="bert-classifier-with-weighted-loss",
        url="https://github.com/pytorch/pytorch/issues/3879",
        classes=(2,),
        setup=BERT
        + """
        model = BertForSequenceClassification(config).to('cuda')
        weights = torch.tensor([1.0, 4.0])
        criterion = nn.CrossEntropyLoss(weight=weights)
        batch = tokenizer(['good movie', 'awful movie'], return_tensors='pt').to('cuda')
        labels = torch.tensor([1, 0], device='cuda')
        """,
        cell="""
        logits = model(**batch).logits
        loss = criterion(logits, labels)
        """,
        culprit="criterion.weight",
        checks=("loss",),
    ),
    # -- 3. library containers: BatchEncoding, dict batches ------------------------------
    Case(
        id="tokenizer-output-not-moved",
        url="https://github.com/cisnlp/simalign/issues/16",
        classes=(3,),
        setup=BERT
        + """
        model = BertForSequenceClassification(config).to('cuda')
        inputs = tokenizer(['the cat sat on the mat'], return_tensors='pt')
        """,
        cell="outputs = model(**inputs)\n",
        culprit="inputs['input_ids']",
        checks=("outputs",),
        fix_has="inputs = inputs.to(",
    ),
    Case(
        id="gpt2-lm-loss-with-tokenized-batch",
        url="https://github.com/yangjianxin1/GPT2-chitchat/issues/8",
        classes=(3,),
        setup=GPT2
        + """
        model = GPT2LMHeadModel(config).to('cuda')
        enc = tokenizer(['hello world the cat sat'], return_tensors='pt')
        """,
        cell="out = model(**enc, labels=enc['input_ids'])\n",
        culprit="enc['input_ids']",
        checks=("out",),
        fix_has="enc = enc.to(",
    ),
    Case(
        id="dict-batch-names-the-consumed-key",
        url="https://github.com/huggingface/accelerate/issues/1167",
        classes=(3,),
        setup=LLAMA
        + """
        model = LlamaForCausalLM(config).to('cuda')
        batch = {
            'attention_mask': torch.ones(2, 6, dtype=torch.long, device='cuda'),
            'input_ids': torch.randint(4, 32, (2, 6)),
        }
        """,
        cell="outputs = model(**batch)\n",
        culprit="batch['input_ids']",
        checks=("outputs",),
    ),
    Case(
        id="dict-batch-all-on-cpu-embedding-fails",
        url="https://github.com/bigscience-workshop/lm-evaluation-harness/pull/72",
        classes=(3,),
        setup=BERT
        + """
        model = BertForSequenceClassification(config).to('cuda')
        batch = {
            'attention_mask': torch.ones(2, 5, dtype=torch.long),
            'token_type_ids': torch.zeros(2, 5, dtype=torch.long),
            'input_ids': torch.randint(4, 32, (2, 5)),
        }
        """,
        cell="out = model(**batch)\n",
        culprit="batch['input_ids']",
        checks=("out",),
    ),
    Case(
        id="custom-input-object-with-its-own-to",
        url="https://github.com/schen149/sub-sentence-encoder/issues/1",
        classes=(3,),
        setup="""
        class PairInput:
            def __init__(self, ids, mask):
                self.ids, self.mask = ids, mask

            def to(self, device):
                return PairInput(self.ids.to(device), self.mask.to(device))

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(32, 16)

            def forward(self, pair):
                return self.emb(pair.ids) * pair.mask.unsqueeze(-1)

        encoder = Encoder().to('cuda')
        sent = PairInput(torch.randint(0, 32, (2, 5)), torch.ones(2, 5))
        """,
        cell="emb = encoder(sent)\n",
        culprit="sent.ids",
        checks=("emb",),
        fix_has="sent = sent.to(",
    ),
    # -- 4. layers in a plain Python list -------------------------------------------------
    Case(
        id="mlp-layers-in-a-plain-list",
        url="https://discuss.pytorch.org/t/when-should-i-use-nn-modulelist-and-when-should-i-use-nn-sequential/5463/18",
        classes=(4,),
        setup="""
        class MLP(nn.Module):
            def __init__(self, d, n):
                super().__init__()
                self.layers = [nn.Linear(d, d) for _ in range(n)]
                self.out = nn.Linear(d, 2)

            def forward(self, x):
                for layer in self.layers:
                    x = torch.relu(layer(x))
                return self.out(x)

        mlp = MLP(8, 3).to('cuda')
        x = torch.randn(4, 8, device='cuda')
        """,
        cell="y = mlp(x)\n",
        culprit="mlp.layers[0]",
        checks=("y",),
    ),
    Case(
        id="mlp-layers-in-a-plain-list-in-ipython",
        url="https://runebook.dev/zh/docs/pytorch/generated/torch.nn.modulelist/torch.nn.ModuleList",
        classes=(4, 7),
        setup=(
            """
            class MyModel(nn.Module):
                def __init__(self, d, n):
                    super().__init__()
                    self.layers = [nn.Linear(d, d)]
                    for _ in range(n - 1):
                        self.layers.append(nn.Linear(d, d))

                def forward(self, x):
                    for layer in self.layers:
                        x = layer(x)
                    return x
            """,
            "mlp = MyModel(10, 3).to('cuda')\n",
            "x = torch.randn(4, 10, device='cuda')\n",
        ),
        cell="y = mlp(x)\n",
        culprit="mlp.layers[0]",
        checks=("y",),
        shell=True,
    ),
    Case(
        id="multitask-heads-in-a-list-on-a-bert-encoder",
        url="https://github.com/Lightning-AI/pytorch-lightning/issues/2984",
        classes=(4,),
        setup=BERT
        + """
        from transformers import BertModel

        class MultiTask(nn.Module):
            def __init__(self, config, sizes):
                super().__init__()
                self.encoder = BertModel(config)
                self.heads = [nn.Linear(config.hidden_size, k) for k in sizes]

            def forward(self, input_ids):
                h = self.encoder(input_ids=input_ids).last_hidden_state[:, 0]
                return [head(h) for head in self.heads]

        model = MultiTask(config, (2, 3)).to('cuda')
        ids = torch.randint(4, 32, (2, 5), device='cuda')
        """,
        cell="logits = model(ids)\n",
        culprit="model.heads[0]",
        checks=("logits[0]", "logits[1]"),
    ),
    Case(
        id="residual-blocks-appended-to-a-list",
        url="https://github.com/ndrplz/ConvLSTM_pytorch/pull/10",
        classes=(4,),
        setup="""
        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)

            def forward(self, x):
                return x + torch.relu(self.fc(x))

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(3, 8)
                self.blocks = []
                for _ in range(2):
                    self.blocks.append(Block(8))

            def forward(self, x):
                x = self.stem(x)
                for block in self.blocks:
                    x = block(x)
                return x

        net = Net().to('cuda')
        points = torch.randn(2, 5, 3, device='cuda')
        """,
        cell="features = net(points)\n",
        culprit="net.blocks[0]",
        checks=("features",),
    ),
    # -- 5. torch.load(map_location='cuda') on a machine without CUDA --------------------
    Case(
        id="torch-load-map-location-cuda",
        url="https://github.com/pytorch/pytorch/issues/25925",
        classes=(5,),
        setup="""
        import os, tempfile
        path = os.path.join(tempfile.mkdtemp(), 'model.pt')
        torch.save(nn.Linear(4, 2).state_dict(), path)
        """,
        cell="state = torch.load(path, map_location='cuda')\n",
        culprit="",  # nothing exists yet: the call itself is what to change
        target="cpu",
        checks=("state['weight']",),
        fake=False,
    ),
    Case(
        id="torch-load-map-location-device-variable",
        url="https://github.com/hkchengrex/Cutie/issues/37",
        classes=(5,),
        setup="""
        import os, tempfile
        path = os.path.join(tempfile.mkdtemp(), 'ckpt.pth')
        torch.save({'epoch': 3, 'model': nn.Linear(4, 2).state_dict()}, path)
        device = torch.device('cuda')
        """,
        cell="ckpt = torch.load(path, map_location=device)\n",
        culprit="",  # nothing exists yet: the call itself is what to change
        target="cpu",
        checks=("ckpt['model']['weight']",),
        fake=False,
    ),
    Case(
        id="load-state-dict-from-cuda-location",
        url="https://github.com/Sujit-O/pykg2vec/issues/223",
        classes=(5,),
        setup="""
        import os, tempfile
        path = os.path.join(tempfile.mkdtemp(), 'weights.pt')
        model = nn.Linear(4, 2)
        torch.save(model.state_dict(), path)
        """,
        cell="model.load_state_dict(torch.load(path, map_location='cuda:0'))\nw = model.weight\n",
        culprit="",  # nothing exists yet: the call itself is what to change
        target="cpu",
        checks=("w",),
        fake=False,
    ),
    # -- 6. a fix makes the whole cell run: every tensor the cell needs moves ------------
    Case(
        id="loader-loop-moves-inputs-and-labels",
        url="https://dev-solve.com/posts/3f078da",
        classes=(6,),
        setup="""
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to('cuda')
        criterion = nn.CrossEntropyLoss()
        loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 3, (8,))), batch_size=4)
        """,
        cell="""
        for xb, yb in loader:
            loss = criterion(model(xb), yb)
        """,
        culprit="xb",
        checks=("loss",),
    ),
    Case(
        id="eval-loop-accuracy-with-cpu-targets",
        url="https://github.com/Lightning-AI/pytorch-lightning/issues/2400",
        classes=(6,),
        setup="""
        model = nn.Linear(4, 3).to('cuda')
        loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 3, (8,))), batch_size=4)
        """,
        cell="""
        correct = 0
        for images, targets in loader:
            preds = model(images).argmax(-1)
            correct = correct + (preds == targets).sum()
        """,
        culprit="images",
        checks=("correct",),
    ),
    Case(
        id="gpt2-loop-with-labels",
        url="https://github.com/huggingface/alignment-handbook/issues/209",
        classes=(6,),
        setup=GPT2
        + """
        model = GPT2LMHeadModel(config).to('cuda')
        data = TensorDataset(torch.randint(4, 32, (4, 6)), torch.randint(4, 32, (4, 6)))
        loader = DataLoader(data, batch_size=2)
        """,
        cell="""
        for input_ids, labels in loader:
            out = model(input_ids=input_ids, labels=labels)
        """,
        culprit="input_ids",
        checks=("out",),
    ),
    Case(
        id="seq2seq-batch-source-and-target",
        url="https://github.com/SamLynnEvans/Transformer/issues/27",
        classes=(6,),
        setup="""
        emb = nn.Embedding(32, 16).to('cuda')
        proj = nn.Linear(16, 32).to('cuda')
        pairs = TensorDataset(torch.randint(0, 32, (4, 5)), torch.randint(0, 32, (4, 5)))
        loader = DataLoader(pairs, batch_size=2)
        """,
        cell="""
        for src, trg in loader:
            logits = proj(emb(src))
            loss = F.cross_entropy(logits.flatten(0, 1), trg.flatten())
        """,
        culprit="src",
        checks=("loss",),
    ),
    # -- 7. naming in IPython: submodules of Sequential attributes -----------------------
    Case(
        id="vgg-features-layer-replaced-after-to",
        url="https://coderoad.ru/54662346/Запутался-о-torch-nn-Sequential",
        classes=(7,),
        setup=(
            """
            class VGGish(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.features = nn.Sequential(nn.Flatten(), nn.Linear(48, 32), nn.ReLU())
                    self.classifier = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 10))

                def forward(self, x):
                    return self.classifier(self.features(x))

            model = VGGish().to('cuda')
            """,
            "model.features[1] = nn.Linear(48, 32)\n",
            "images = torch.randn(2, 3, 4, 4, device='cuda')\n",
        ),
        cell="out = model(images)\n",
        culprit="model.features[1]",
        checks=("out",),
        shell=True,
    ),
    Case(
        id="vgg-classifier-head-replaced-for-transfer-learning",
        url="https://deependujha.github.io/pytorch-codes/docs/01-basics/02-concepts/04-transfer-learning",
        classes=(7,),
        setup=(
            """
            class VGGish(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(2))
                    self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 10))

                def forward(self, x):
                    return self.classifier(self.features(x))

            model = VGGish().to('cuda')
            """,
            "model.classifier[3] = nn.Linear(16, 5)\n",
            "images = torch.randn(2, 3, 8, 8, device='cuda')\n",
        ),
        cell="out = model(images)\n",
        culprit="model.classifier[3]",
        checks=("out",),
        shell=True,
    ),
    Case(
        id="resnet-fc-replaced-after-to-in-ipython",
        url="https://theneuralbase.com/pytorch/learn/intermediate/replacing-the-classification-head/",
        classes=(0,),
        setup=(
            """
            class TinyResNet(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
                    self.avgpool = nn.AdaptiveAvgPool2d(1)
                    self.fc = nn.Linear(8, 1000)

                def forward(self, x):
                    return self.fc(self.avgpool(torch.relu(self.conv1(x))).flatten(1))

            model = TinyResNet().to('cuda')
            """,
            "model.fc = nn.Linear(8, 10)\n",
            "images = torch.randn(2, 3, 8, 8, device='cuda')\n",
        ),
        cell="out = model(images)\n",
        culprit="model.fc",
        checks=("out",),
        shell=True,
    ),
    # -- 8. fixes in the user's words; root fixes from cell history ----------------------
    Case(
        id="fix-uses-the-device-variable",
        url="https://github.com/Comfy-Org/ComfyUI/issues/2363",
        classes=(8,),
        setup="""
        device = torch.device('cuda')
        model = nn.Linear(8, 2).to(device)
        features = torch.randn(4, 8)
        """,
        cell="out = model(features)\n",
        culprit="features",
        checks=("out",),
        fix_has="features.to(device)",
    ),
    Case(
        id="fix-uses-the-DEVICE-string",
        url="https://github.com/wingedsheep/transformer/issues/4",
        classes=(8,),
        setup=GPT2
        + """
        DEVICE = 'cuda:0'
        model = GPT2LMHeadModel(config).to(DEVICE)
        ids = tokenizer(['the dog sat'], return_tensors='pt')['input_ids']
        """,
        cell="logits = model(ids).logits\n",
        culprit="ids",
        checks=("logits",),
        fix_has="ids.to(DEVICE)",
    ),
    Case(
        id="hidden-state-made-in-an-earlier-cell",
        url="https://github.com/Lightning-AI/pytorch-lightning/issues/3738",
        classes=(8,),
        setup=(
            """
            dev = torch.device('cuda')
            lstm = nn.LSTM(4, 8, batch_first=True).to(dev)
            x = torch.randn(2, 5, 4, device=dev)
            """,
            """
            batch_size = x.shape[0]
            h0 = torch.zeros(1, batch_size, 8)
            c0 = torch.zeros(1, batch_size, 8)
            """,
        ),
        cell="out, (h, c) = lstm(x, (h0, c0))\n",
        culprit="h0",
        checks=("out", "h"),
        fix_has="h0.to(dev)",
        offers="h0 = torch.zeros(1, batch_size, 8, device=dev)",
        shell=True,
    ),
    Case(
        id="positional-table-as-a-plain-attribute",
        url="https://github.com/wingedsheep/transformer/issues/4",
        classes=(8,),
        setup="""
        import numpy as np

        class PositionalEncoding(nn.Module):
            def __init__(self, d, n=16):
                super().__init__()
                table = np.zeros((n, d), dtype=np.float32)
                self.pe = torch.from_numpy(table)
                self.proj = nn.Linear(d, d)

            def forward(self, x):
                return self.proj(x) + self.pe[: x.shape[1]]

        device = 'cuda'
        enc = PositionalEncoding(8).to(device)
        x = torch.randn(2, 5, 8, device=device)
        """,
        cell="y = enc(x)\n",
        culprit="enc.pe",
        checks=("y",),
        fix_has="register_buffer",
    ),
    # -- 9. noise: library pass-through frames stay out of the objects table ------------
    Case(
        id="llama-forward-table-without-wrapper-frames",
        url="https://github.com/huggingface/peft/issues/776",
        classes=(9,),
        setup=LLAMA
        + """
        model = LlamaForCausalLM(config).to('cuda')
        inputs = tokenizer(['hello world'], return_tensors='pt')
        """,
        cell="out = model(input_ids=inputs['input_ids'])\n",
        culprit="inputs['input_ids']",
        checks=("out",),
        clean=True,
    ),
    Case(
        id="peft-lora-model-with-cpu-inputs",
        url="https://github.com/huggingface/peft/issues/1831",
        classes=(3, 9),
        setup=LLAMA
        + """
        from peft import LoraConfig, get_peft_model
        base = LlamaForCausalLM(config).to('cuda')
        peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=['q_proj', 'v_proj']))
        inputs = tokenizer(['the cat sat on the mat'], return_tensors='pt')
        """,
        cell="""
        with torch.no_grad():
            outputs = peft_model(**inputs)
        """,
        culprit="inputs['input_ids']",
        checks=("outputs",),
        clean=True,
    ),
    Case(
        id="peft-lora-head-added-after-to",
        url="https://github.com/huggingface/trl/issues/1016",
        classes=(9,),
        setup=GPT2
        + """
        from peft import LoraConfig, get_peft_model
        model = GPT2LMHeadModel(config).to('cuda')
        model.score = nn.Linear(64, 2)
        peft_model = get_peft_model(model, LoraConfig(r=4, target_modules=['c_attn'], fan_in_fan_out=True))
        ids = torch.randint(4, 32, (1, 6), device='cuda')
        """,
        cell="""
        hidden = peft_model(input_ids=ids, output_hidden_states=True).hidden_states[-1]
        scores = model.score(hidden)
        """,
        culprit="model.score",
        checks=("scores",),
        clean=True,
    ),
    Case(
        id="dispatched-model-factory-without-device",
        url="https://github.com/huggingface/accelerate/issues/1041",
        classes=(9,),
        setup="""
        from accelerate import dispatch_model

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(32, 16)
                self.out = nn.Linear(16, 4)

            def forward(self, ids):
                pos = torch.arange(ids.shape[1])
                return self.out(self.emb(ids) + pos.unsqueeze(-1))

        model = dispatch_model(Tagger(), device_map={'': 0})
        ids = torch.randint(0, 32, (2, 5), device='cuda')
        """,
        cell="tags = model(ids)\n",
        culprit="pos in Tagger.forward",
        checks=("tags",),
        clean=True,
    ),
    # -- other errors: the panel stays quiet --------------------------------------------
    Case(
        id="quiet-shape-mismatch-in-bert",
        url="https://github.com/huggingface/transformers/issues/227",
        classes=(0,),
        setup=BERT
        + """
        model = BertForSequenceClassification(config).to('cuda')
        ids = torch.randint(4, 32, (2, 6), device='cuda')
        mask = torch.ones(2, 4, dtype=torch.long, device='cuda')
        """,
        cell="out = model(input_ids=ids, attention_mask=mask)\n",
        quiet=True,
    ),
    Case(
        id="quiet-tokenizer-without-padding",
        url="https://github.com/huggingface/transformers/issues/23988",
        classes=(0,),
        setup=BERT,
        cell="enc = tokenizer(['hello', 'the cat sat'], return_tensors='pt')\n",
        quiet=True,
        fake=False,
    ),
    Case(
        id="quiet-peft-target-module-missing",
        url="https://github.com/huggingface/peft/issues/3043",
        classes=(0,),
        setup=LLAMA
        + """
        from peft import LoraConfig, get_peft_model
        model = LlamaForCausalLM(config)
        """,
        cell="peft_model = get_peft_model(model, LoraConfig(target_modules=['query_key_value']))\n",
        quiet=True,
        fake=False,
    ),
    Case(
        id="quiet-dtype-mismatch",
        url="https://github.com/yuta-hi/pytorch_similarity/issues/1",
        classes=(0,),
        setup="""
        model = nn.Linear(4, 2)
        x = torch.randn(3, 4, dtype=torch.float64)
        """,
        cell="out = model(x)\n",
        quiet=True,
        fake=False,  # fake CUDA tensors do not check dtypes: the cell would run
    ),
]
