"""The fourth corpus, second blind batch (issue 27), continued: paths through a
``ModuleDict`` and two libraries' optimizer state (mechanism 5), culprit ranking (6), split
models and CPU generators (7), a discarded ``.to()`` (8), everyday mistakes with
rotary-embedding-torch, and other errors the panel must leave alone. See
``realworld_cases4.py``.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

#: Moves a model as a GPU does, keeping the Parameter objects an optimizer holds (the
#: stand-in makes new ones unless the parameters are swapped in place).
MOVE_KEEPING_PARAMETERS = """
        torch.__future__.set_swap_module_params_on_conversion(True)
        model.to(device)
        torch.__future__.set_swap_module_params_on_conversion(False)
"""

CASES: list[Case] = [
    # -- 5. paths through a ModuleDict and optimizer state --------------------------------
    Case(
        id="moduledict-heads-keep-plain-temperatures",
        url="https://github.com/bayesiains/nflows/pull/48",
        classes=(5,),
        setup="""
        class Calibrated(nn.Module):
            def __init__(self, d, n):
                super().__init__()
                self.fc = nn.Linear(d, n)
                self.temperature = torch.full((n,), 1.5)    # not a buffer

            def forward(self, z):
                return self.fc(z) / self.temperature

        class MultiTask(nn.Module):
            def __init__(self):
                super().__init__()
                self.trunk = nn.Linear(8, 16)
                self.heads = nn.ModuleDict({'age': Calibrated(16, 1), 'sex': Calibrated(16, 2)})

            def forward(self, x):
                z = self.trunk(x).relu()
                return {name: head(z) for name, head in self.heads.items()}

        mt = MultiTask().to('cuda')
        x = torch.randn(4, 8, device='cuda')
        """,
        cell="out = mt(x)\n",
        culprit="mt.heads['age'].temperature",
        checks=("out['age']", "out['sex']"),
    ),
    Case(
        id="schedulefree-state-made-before-the-move",
        url="https://github.com/Nerogar/OneTrainer/issues/645",
        classes=(5,),
        setup=(
            OPENREG
            + """
        import schedulefree
        model = nn.Linear(4, 2)
        opt = schedulefree.AdamWScheduleFree(model.parameters(), lr=1e-2)
        opt.train()
        model(torch.randn(3, 4)).sum().backward()
        opt.step()                                  # a smoke test on the CPU makes the state
        """
            + MOVE_KEEPING_PARAMETERS
            + """
        opt.zero_grad()
        model(torch.randn(3, 4).to(device)).sum().backward()
        """
        ),
        cell="opt.step()\n",
        culprit="opt.state[model.weight]['exp_avg_sq']",
        target="openreg:0",
        checks=(
            "opt.state[model.weight]['z']",
            "opt.state[model.weight]['exp_avg_sq']",
            "opt.state[model.bias]['z']",
        ),
        fake=False,
        standin=True,
        needs=("schedulefree",),
    ),
    Case(
        id="lookahead-slow-weights-made-before-the-move",
        url="https://github.com/michaelrzhang/lookahead/pull/8",
        classes=(5,),
        setup=(
            OPENREG
            + """
        import torch_optimizer
        model = nn.Linear(4, 2)
        opt = torch_optimizer.Lookahead(torch.optim.SGD(model.parameters(), lr=0.1), k=1)
        model(torch.randn(3, 4)).sum().backward()
        opt.step()                           # the first step caches the slow weights, on the CPU
        """
            + MOVE_KEEPING_PARAMETERS
            + """
        opt.zero_grad()
        model(torch.randn(3, 4).to(device)).sum().backward()
        """
        ),
        cell="opt.step()\n",
        culprit="opt.state[model.weight]['slow_param']",
        target="openreg:0",
        checks=("opt.state[model.weight]['slow_param']", "opt.state[model.bias]['slow_param']"),
        fake=False,
        standin=True,
        needs=("torch_optimizer",),
    ),
    # -- 6. culprit ranking ---------------------------------------------------------------
    Case(
        id="captum-baseline-and-target-both-on-cpu",
        url="https://github.com/meta-pytorch/captum/issues/580",
        classes=(6,),
        setup=OPENREG
        + """
        from captum.attr import IntegratedGradients
        net = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 2)).to(device)
        net.eval()
        inputs = torch.randn(3, 5).to(device)
        baseline = torch.zeros(3, 5)
        target = torch.tensor([1, 0, 1])
        ig = IntegratedGradients(net)
        """,
        cell="attributions = ig.attribute(inputs, baselines=baseline, target=target, n_steps=8)\n",
        culprit="baseline",
        target="openreg:0",
        checks=("attributions",),
        fake=False,
        standin=True,
        needs=("captum",),
    ),
    Case(
        id="evaluation-images-and-labels-both-left-on-cpu",
        url="https://github.com/pytorch/tutorials/pull/1657",
        classes=(6,),
        setup=OPENREG
        + """
        classifier = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(),
                                   nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 10)).to(device)
        test_loader = DataLoader(TensorDataset(torch.randn(8, 1, 6, 6), torch.randint(0, 10, (8,))),
                                 batch_size=4)
        X, y = next(iter(test_loader))
        """,
        cell="""
        pred = classifier(X)
        correct = (pred.argmax(1) == y).float().sum()
        """,
        culprit="X",
        target="openreg:0",
        checks=("pred", "correct"),
        fake=False,
        standin=True,
    ),
    Case(
        id="proxy-loss-module-and-labels-left-on-cpu",
        url="https://github.com/KevinMusgrave/pytorch-metric-learning/issues/139",
        classes=(6,),
        setup="""
        class ProxyNCA(nn.Module):
            def __init__(self, num_classes, dim):
                super().__init__()
                self.proxies = nn.Parameter(torch.randn(num_classes, dim))

            def forward(self, emb, labels):
                sims = F.normalize(emb, dim=-1) @ F.normalize(self.proxies, dim=-1).T
                return F.cross_entropy(sims * 8, labels)

        embedder = nn.Linear(16, 8).to('cuda')
        proxy_loss = ProxyNCA(num_classes=5, dim=8)       # never moved
        feats = torch.randn(6, 16, device='cuda')
        labels = torch.randint(0, 5, (6,))
        """,
        cell="loss = proxy_loss(embedder(feats), labels)\n",
        culprit="proxy_loss",
        checks=("loss",),
    ),
    # -- 7. split models and generators ---------------------------------------------------
    Case(
        id="lm-head-kept-on-the-cpu-on-purpose",
        xfail="issue 27 mechanism 7: a head kept on the CPU on purpose (said only in a comment; no code of the model moves between devices) is moved to openreg:0, where the case wants `h` moved to the CPU",
        url="https://github.com/komikndr/raylight/issues/40",
        classes=(7,),
        setup=OPENREG
        + """
        body = nn.Sequential(nn.Embedding(50, 16), nn.Linear(16, 16), nn.GELU()).to(device)
        lm_head = nn.Linear(16, 50)    # left in host memory on purpose: the vocabulary is large
        ids = torch.randint(0, 50, (2, 6)).to(device)
        """,
        cell="h = body(ids)\nlogits = lm_head(h)\n",
        culprit="h",
        target="cpu",
        checks=("logits",),
        fake=False,
        standin=True,
    ),
    Case(
        id="noise-drawn-with-a-cpu-generator",
        xfail="issue 27 mechanism 7, the stand-in's limit: `gen` is named and target and fix are right (made again from its seed), but openreg has no generators (a PrivateUse1 generator needs C++ hooks), so the fix cannot run here; tests/test_gpu.py applies it on CUDA",
        url="https://github.com/mit-ll-responsible-ai/responsible-ai-toolbox/issues/45",
        classes=(7,),
        setup=OPENREG
        + """
        gen = torch.Generator().manual_seed(0)      # seeded once for reproducible perturbations
        model = nn.Sequential(nn.Flatten(), nn.Linear(12, 3)).to(device)
        x = torch.rand(2, 3, 2, 2).to(device)
        """,
        cell="""
        delta = x.new_empty(x.shape).normal_(generator=gen) * 0.01
        logits = model(x + delta)
        """,
        culprit="gen",
        target="openreg:0",
        checks=("delta", "logits"),
        fake=False,
        standin=True,
    ),
    Case(
        id="ema-copy-kept-on-the-cpu-on-purpose",
        url="https://github.com/lucidrains/alphafold3-pytorch/pull/119",
        classes=(7,),
        setup=OPENREG
        + """
        from ema_pytorch import EMA
        net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        # the EMA copy stays in host memory; its updates move what they need
        ema = EMA(net, beta=0.99, update_after_step=0, update_every=1, allow_different_devices=True)
        net.to(device)
        ema.update()
        x_val = torch.randn(5, 4).to(device)
        """,
        cell="preds = ema(x_val)\n",
        culprit="x_val",
        target="cpu",
        checks=("preds",),
        fake=False,
        standin=True,
        needs=("ema_pytorch",),
    ),
    # -- 8. a discarded .to() -------------------------------------------------------------
    Case(
        id="to-discarded-inside-a-dataloader-loop",
        url="https://github.com/BindsNET/bindsnet/pull/667",
        classes=(8,),
        setup="""
        device = 'cuda'
        model = nn.Linear(4, 2).to(device)
        loader = DataLoader(TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,))),
                            batch_size=4)
        """,
        cell="""
        losses = []
        for xb, yb in loader:
            xb.to(device)
            yb.to(device)
            loss = F.cross_entropy(model(xb), yb)
            losses.append(loss)
        """,
        culprit="xb",
        checks=("loss", "losses[0]"),
        fix_has="xb = xb.to(device)",
    ),
    Case(
        id="to-discarded-on-each-value-of-a-batch-dict",
        url="https://github.com/pytorch/tutorials/pull/1890",
        classes=(8,),
        setup="""
        device = torch.device('cuda')
        model = nn.Linear(5, 2).to(device)
        batch = {'x': torch.randn(3, 5), 'mask': torch.ones(3, 2)}
        """,
        cell="""
        for k in batch:
            batch[k].to(device)
        out = model(batch['x']) * batch['mask']
        """,
        culprit="batch['x']",
        checks=("out",),
        fix_has="batch[k] = batch[k].to(device)",
    ),
    Case(
        id="to-discarded-in-a-list-comprehension",
        url="https://github.com/patrickloeber/pytorchTutorial/pull/13",
        classes=(8,),
        setup="""
        device = 'cuda'
        reg = nn.Linear(3, 1).to(device)
        x = torch.randn(6, 3)
        y = torch.randn(6, 1)
        """,
        cell="""
        [t.to(device) for t in (x, y)]
        pred = reg(x)
        loss = F.mse_loss(pred, y)
        """,
        culprit="x",
        checks=("pred", "loss"),
    ),
    # -- everyday mistakes ------------------------------------------------------------------
    Case(
        id="rotary-embedding-built-outside-the-model",
        url="https://github.com/yandex-research/specexec/issues/1",
        classes=(0,),
        setup=OPENREG
        + """
        from rotary_embedding_torch import RotaryEmbedding
        rotary = RotaryEmbedding(dim=8)

        class SelfAttention(nn.Module):
            def __init__(self, d=16, heads=2):
                super().__init__()
                self.heads = heads
                self.qkv = nn.Linear(d, 3 * d)

            def forward(self, x):
                b, n, _ = x.shape
                q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
                q, k = rotary.rotate_queries_or_keys(q), rotary.rotate_queries_or_keys(k)
                out = F.scaled_dot_product_attention(q, k, v)
                return out.transpose(1, 2).reshape(b, n, -1)

        attn = SelfAttention().to(device)
        x = torch.randn(2, 5, 16).to(device)
        """,
        cell="y = attn(x)\n",
        culprit="rotary",
        target="openreg:0",
        checks=("y",),
        fake=False,
        standin=True,
        needs=("rotary_embedding_torch",),
    ),
    Case(
        id="sample-weights-from-numpy-in-the-loss",
        url="https://github.com/lschmiddey/deep_tabular_augmentation/issues/11",
        classes=(0,),
        setup="""
        import numpy as np
        reg = nn.Linear(4, 1).to('cuda')
        x = torch.randn(6, 4, device='cuda')
        y = torch.randn(6, 1, device='cuda')
        sample_weights = np.linspace(0.5, 1.5, 6).astype('float32')[:, None]
        """,
        cell="""
        w = torch.from_numpy(sample_weights)
        loss = (F.mse_loss(reg(x), y, reduction='none') * w).mean()
        """,
        culprit="w",
        checks=("loss",),
    ),
    # -- other errors: the panel stays quiet ----------------------------------------------------
    Case(
        id="quiet-captum-target-index-out-of-range",
        url="https://github.com/meta-pytorch/captum/issues/1182",
        classes=(0,),
        setup="""
        from captum.attr import IntegratedGradients
        net = nn.Linear(5, 3)
        ig = IntegratedGradients(net)
        """,
        cell="attr = ig.attribute(torch.randn(2, 5), target=7, n_steps=4)\n",
        quiet=True,
        fake=False,
        needs=("captum",),
    ),
    Case(
        id="quiet-rotary-embedding-odd-dimension",
        url="https://github.com/lucidrains/rotary-embedding-torch/issues/45",
        classes=(0,),
        setup="""
        from rotary_embedding_torch import RotaryEmbedding
        rotary = RotaryEmbedding(dim=9)
        """,
        cell="q = rotary.rotate_queries_or_keys(torch.randn(1, 2, 6, 9))\n",
        quiet=True,
        fake=False,
        needs=("rotary_embedding_torch",),
    ),
    Case(
        id="quiet-schedulefree-step-outside-train-mode",
        url="https://github.com/kohya-ss/sd-scripts/issues/1667",
        classes=(0,),
        setup="""
        import schedulefree
        model = nn.Linear(4, 2)
        opt = schedulefree.AdamWScheduleFree(model.parameters(), lr=1e-2)
        model(torch.randn(3, 4)).sum().backward()
        """,
        cell="opt.step()\n",
        quiet=True,
        fake=False,
        needs=("schedulefree",),
    ),
]
