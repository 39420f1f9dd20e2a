"""The fourth corpus, second blind batch (issue 27): code shapes and libraries the earlier
corpora do not use, expectations written before ipydevice ran on them, by an author who had
not read the engine.

Libraries new to the corpus: captum (``IntegratedGradients``), zuko (``MAF`` flows),
rotary-embedding-torch, ema-pytorch, schedulefree and torch-optimizer (``Lookahead``).
Shapes: a ``torch.eye`` one-hot, ``index_select`` into a CPU mask, a helper module's
globals, a ``functools.cached_property``, ``torch.distributions.Categorical`` and a
``NamedTuple`` as holders, a flow kept in a plain dict, a ``functools.partial`` and plain
objects that keep the old tensor after the global is rebound, a list of tensors in a module,
a ``ModuleDict`` read in a dict comprehension, optimizer state of two libraries, CPU
generators, a head and an EMA kept on the CPU on purpose, ``.to()`` dropped in a loop, on a
dict's values and in a list comprehension.

This file: lookups and index operators (mechanism 1 of issue 27), tensors no variable names
(2), holders without ``.to()`` (3) and aliases (4); ``realworld_cases4b.py`` has the rest.
``classes`` names the mechanisms a case exercises (0: none). Cases on ``openreg``
(``standin=True``) are those whose library or fix reads tensor values, or whose error fake
CUDA does not raise; ``openreg:0`` stands for the report's GPU.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

CASES: list[Case] = [
    # -- 1. lookups and index operators ---------------------------------------------------
    Case(
        id="captum-attribution-target-labels-left-on-cpu",
        url="https://github.com/InseeFrLab/torchTextClassifiers/pull/97",
        classes=(1,),
        setup=OPENREG
        + """
        from captum.attr import IntegratedGradients
        clf = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
        clf.eval()
        x = torch.randn(4, 6).to(device)
        labels = torch.tensor([0, 2, 1, 2])      # read from the dataframe, on the CPU
        ig = IntegratedGradients(clf)
        """,
        cell="attr = ig.attribute(x, baselines=x * 0, target=labels, n_steps=8)\n",
        culprit="labels",
        target="openreg:0",
        checks=("attr",),
        fake=False,
        standin=True,
        needs=("captum",),
    ),
    Case(
        id="dice-loss-one-hot-from-a-cpu-eye",
        xfail="issue 27 mechanism 1 (and 2): `torch.eye(num_classes)[labels]` indexes a table made in the failing line: no culprit, target cpu, no fix",
        url="https://github.com/likyoo/Siam-NestedUNet/issues/40",
        classes=(1, 2),
        setup=OPENREG
        + """
        def dice_loss(logits, true, eps=1e-7):
            num_classes = logits.shape[1]
            true_1_hot = torch.eye(num_classes)[true.squeeze(1)]
            true_1_hot = true_1_hot.permute(0, 3, 1, 2).float()
            probas = F.softmax(logits, dim=1)
            inter = (probas * true_1_hot).sum((0, 2, 3))
            card = (probas + true_1_hot).sum((0, 2, 3))
            return 1 - (2 * inter / (card + eps)).mean()

        seg = nn.Conv2d(3, 4, 1).to(device)
        imgs = torch.randn(2, 3, 5, 5).to(device)
        masks = torch.randint(0, 4, (2, 1, 5, 5)).to(device)
        """,
        cell="loss = dice_loss(seg(imgs), masks)\n",
        culprit="torch.eye(num_classes) in dice_loss",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
    ),
    Case(
        id="banned-token-mask-index-selected-by-gpu-ids",
        url="https://github.com/deepspeedai/DeepSpeedExamples/issues/743",
        classes=(1,),
        setup=OPENREG
        + """
        vocab_size = 20
        banned = torch.zeros(vocab_size, dtype=torch.bool)
        banned[torch.tensor([3, 7, 11])] = True     # built once from the tokenizer, on the CPU
        lm = nn.Sequential(nn.Embedding(vocab_size, 8), nn.Linear(8, vocab_size)).to(device)
        ids = torch.randint(0, vocab_size, (2, 5)).to(device)
        """,
        cell="""
        logits = lm(ids)[:, -1]
        hit = banned.index_select(0, logits.argmax(-1))
        logits = logits.masked_fill(banned, float('-inf'))
        next_ids = logits.argmax(-1)
        """,
        culprit="banned",
        target="openreg:0",
        checks=("logits", "next_ids"),
        fake=False,
        standin=True,
    ),
    # -- 2. tensors no variable names -----------------------------------------------------
    Case(
        id="helper-module-normalisation-globals",
        url="https://github.com/pytorch/pytorch/issues/19028",
        classes=(2,),
        setup="""
        import os
        import sys
        import tempfile
        helpers = tempfile.mkdtemp()
        with open(os.path.join(helpers, 'prep_utils.py'), 'w') as f:
            f.write(
                "import torch\\n"
                "MEAN = torch.tensor([0.5, 0.4, 0.3]).view(1, 3, 1, 1)\\n"
                "STD = torch.tensor([0.2, 0.2, 0.2]).view(1, 3, 1, 1)\\n"
                "def normalize(x):\\n"
                "    return (x - MEAN) / STD\\n"
            )
        sys.path.insert(0, helpers)
        sys.modules.pop('prep_utils', None)
        import prep_utils

        backbone = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 5)).to('cuda')
        images = torch.rand(2, 3, 4, 4, device='cuda')
        """,
        cell="x = prep_utils.normalize(images)\nfeats = backbone(x)\n",
        culprit="prep_utils.MEAN",
        checks=("x", "feats"),
    ),
    Case(
        id="cached-property-grid-filled-before-the-move",
        url="https://github.com/unit8co/darts/issues/3052",
        classes=(2,),
        setup="""
        from functools import cached_property

        class Warp(nn.Module):
            def __init__(self, h=4, w=4):
                super().__init__()
                self.h, self.w = h, w
                self.offset = nn.Conv2d(2, 2, 3, padding=1)

            @cached_property
            def base_grid(self):
                ys, xs = torch.meshgrid(torch.linspace(-1, 1, self.h),
                                        torch.linspace(-1, 1, self.w), indexing='ij')
                return torch.stack([xs, ys])[None]

            def forward(self, flow):
                return self.base_grid + self.offset(flow)

        warp = Warp()
        _ = warp(torch.zeros(1, 2, 4, 4))     # a quick check on the CPU fills the cache
        warp.to('cuda')
        flow = torch.randn(1, 2, 4, 4, device='cuda')
        """,
        cell="grid = warp(flow)\n",
        culprit="warp.base_grid",
        checks=("grid",),
    ),
    # -- 3. holders without .to() ---------------------------------------------------------
    Case(
        id="categorical-uniform-prior-in-a-kl-term",
        url="https://github.com/lucidrains/DALLE-pytorch/issues/41",
        classes=(3,),
        setup=OPENREG
        + """
        from torch.distributions import Categorical, kl_divergence
        num_tokens = 6
        prior = Categorical(probs=torch.full((num_tokens,), 1.0 / num_tokens))
        encoder = nn.Linear(10, num_tokens).to(device)
        x = torch.randn(4, 10).to(device)
        """,
        cell="""
        posterior = Categorical(logits=encoder(x))
        kl = kl_divergence(posterior, prior).mean()
        """,
        culprit="prior",
        target="openreg:0",
        checks=("kl",),
        fake=False,
        standin=True,
    ),
    Case(
        id="namedtuple-of-target-statistics",
        url="https://github.com/fastai/fastai2/issues/158",
        classes=(3,),
        setup="""
        from typing import NamedTuple

        class Stats(NamedTuple):
            mean: torch.Tensor
            std: torch.Tensor

        stats = Stats(mean=torch.tensor([10.0, 0.5, 3.0]), std=torch.tensor([2.0, 0.1, 1.0]))
        regressor = nn.Linear(3, 1).to('cuda')
        x = torch.randn(5, 3, device='cuda')
        """,
        cell="y = regressor((x - stats.mean) / stats.std)\n",
        culprit="stats.mean",
        checks=("y",),
    ),
    Case(
        id="zuko-flow-head-kept-in-a-plain-dict",
        url="https://github.com/Bayer-Group/MotherML/issues/60",
        classes=(3, 5),
        setup=OPENREG
        + """
        import zuko

        class FlowRegressor(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3))
                self.heads = {'flow': zuko.flows.MAF(features=2, context=3, transforms=2,
                                                     hidden_features=(16,))}

            def forward(self, x, y):
                return -self.heads['flow'](self.body(x)).log_prob(y)

        model = FlowRegressor().to(device)
        x = torch.randn(8, 5).to(device)
        y = torch.randn(8, 2).to(device)
        """,
        cell="nll = model(x, y).mean()\n",
        culprit="model.heads['flow']",
        target="openreg:0",
        checks=("nll",),
        fake=False,
        standin=True,
        needs=("zuko",),
    ),
    # -- 4. aliases -------------------------------------------------------------------------
    Case(
        id="partial-loss-keeps-the-old-class-weight",
        url="https://github.com/pytorch/pytorch/pull/150750",
        classes=(4, 2),
        setup="""
        from functools import partial
        class_w = torch.tensor([1.0, 3.0, 0.5])
        criterion = partial(F.cross_entropy, weight=class_w, label_smoothing=0.1)
        class_w = class_w.to('cuda')     # moved after the partial took it
        clf = nn.Linear(6, 3).to('cuda')
        x = torch.randn(4, 6, device='cuda')
        y = torch.randint(0, 3, (4,), device='cuda')
        """,
        cell="loss = criterion(clf(x), y)\n",
        culprit="criterion.keywords['weight']",
        checks=("loss",),
    ),
    Case(
        id="standardize-layer-keeps-a-list-of-global-stats",
        url="https://github.com/seyonechithrananda/bert-loves-chemistry/pull/15",
        classes=(4, 5),
        setup="""
        mean = torch.tensor([0.1, 0.2, 0.3, 0.4])
        std = torch.tensor([1.0, 2.0, 1.0, 2.0])

        class Standardize(nn.Module):
            def __init__(self, stats):
                super().__init__()
                self.stats = stats            # a plain list: neither parameters nor buffers

            def forward(self, x):
                return (x - self.stats[0]) / self.stats[1]

        net = nn.Sequential(Standardize([mean, std]), nn.Linear(4, 2))
        mean, std = mean.to('cuda'), std.to('cuda')
        net = net.to('cuda')
        x = torch.randn(3, 4, device='cuda')
        """,
        cell="out = net(x)\n",
        culprit="net[0].stats[0]",
        checks=("out",),
    ),
    Case(
        id="center-loss-object-keeps-the-cpu-centers",
        url="https://github.com/AIStream-Peelout/flow-forecast/issues/228",
        classes=(4, 3, 1),
        setup=OPENREG
        + """
        class CenterLoss:
            def __init__(self, centers):
                self.centers = centers

            def __call__(self, feats, labels):
                return ((feats - self.centers[labels]) ** 2).sum(1).mean()

        centers = torch.randn(3, 8)
        center_loss = CenterLoss(centers)
        centers = centers.to(device)         # the object still holds the CPU tensor
        embedder = nn.Linear(6, 8).to(device)
        x = torch.randn(5, 6).to(device)
        labels = torch.tensor([0, 1, 2, 1, 0]).to(device)
        """,
        cell="loss = center_loss(embedder(x), labels)\n",
        culprit="center_loss.centers",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
    ),
]
