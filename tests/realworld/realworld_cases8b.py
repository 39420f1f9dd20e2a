"""The eighth corpus, sixth blind batch (issue 27), continued: plain PyTorch shapes the corpus
lacked and the batch's quiet cases. See ``realworld_cases8.py``.

Shapes: a model built under ``torch.device('meta')`` then moved with ``.to()`` (the fix is
``to_empty``), a ``key_padding_mask.to(device)`` whose result is dropped, a custom
parametrization holding a plain mask tensor (``nn.utils.parametrize``), a
``WeightedRandomSampler`` whose weights were computed on the GPU next to a CPU generator (the
target is the CPU), a ``torch.distributions`` prior for ``kl_divergence``, class weights
captured in a loss function's closure, ``torch.where`` with a validity mask from numpy, a plain
dict of encoders that is not a ``ModuleDict``, a ``functools.cached_property`` computed before
the move, a bias table assigned after the move, an RNN initial state made inside ``forward``, a
``SimpleNamespace`` config holding ``pos_weight`` and a custom optimizer whose state is made in
``__init__`` without a device. Quiet cases: a feature width an EGNN layer does not take, an
entity id past a torchkge table, a TCN fed channels-last and a Reformer sequence that is not a
multiple of its buckets.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

CASES: list[Case] = [
    # -- plain PyTorch --------------------------------------------------------------------
    # Verified: NotImplementedError: Cannot copy out of meta tensor; no data! Please use
    # torch.nn.Module.to_empty() instead of torch.nn.Module.to() when moving module from
    # meta to a different device.
    Case(
        id="meta-initialised-model-moved-with-to",
        url="https://github.com/AI4Bharat/IndicF5/issues/28",
        classes=(0,),
        setup=OPENREG
        + """
        class Classifier(nn.Module):
            def __init__(self, d=32, n=5):
                super().__init__()
                self.body = nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, 64))
                self.head = nn.Linear(64, n)

            def forward(self, x):
                return self.head(self.body(x))

        with torch.device('meta'):
            model = Classifier()          # no memory until the weights are loaded
        x = torch.randn(4, 32).to(device)
        """,
        cell="""
        model = model.to(device)
        for m in model.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        logits = model(x)
        """,
        culprit="model",
        target="openreg:0",
        checks=("logits",),
        fix_has="to_empty",
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cpu and cuda:0!
    Case(
        id="mha-padding-mask-moved-but-not-reassigned",
        url="https://github.com/dqwang122/HeterSumGraph/issues/36",
        classes=(8,),
        setup="""
        device = 'cuda'
        attn = nn.MultiheadAttention(embed_dim=16, num_heads=2, batch_first=True).to(device)
        seq = torch.randn(3, 7, 16, device=device)
        lengths = [7, 5, 3]
        key_padding_mask = torch.tensor([[i >= n for i in range(7)] for n in lengths])
        """,
        cell="""
        key_padding_mask.to(device)
        ctx, weights = attn(seq, seq, seq, key_padding_mask=key_padding_mask)
        """,
        culprit="key_padding_mask",
        checks=("ctx",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="parametrization-with-a-plain-mask-tensor",
        url="https://github.com/pytorch/pytorch/issues/39311",
        classes=(5,),
        setup="""
        import torch.nn.utils.parametrize as P
        device = 'cuda'

        class LowerTriangular(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.mask = torch.ones(n, n).tril()

            def forward(self, w):
                return w * self.mask

        model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
        P.register_parametrization(model[0], 'weight', LowerTriangular(8))
        model.to(device)
        x = torch.randn(5, 8, device=device)
        """,
        cell="y = model(x)\n",
        culprit="model[0].parametrizations.weight[0].mask",
        checks=("y",),
    ),
    # Verified: Expected a 'openreg' device type for generator but found 'cpu'
    Case(
        id="weighted-sampler-weights-built-on-the-gpu",
        url="https://github.com/NarcissusEx/CuNeRF/issues/8",
        xfail="issue 27 mechanism 7: a sampler's weights on the device with a CPU generator: no culprit, target openreg:0",
        classes=(5,),
        setup=OPENREG
        + """
        from torch.utils.data import WeightedRandomSampler
        labels = torch.tensor([0] * 12 + [1] * 3 + [2] * 1)
        dataset = TensorDataset(torch.randn(16, 4), labels)
        counts = torch.bincount(labels).float().to(device)
        sample_weights = (1.0 / counts)[labels.to(device)]
        sampler = WeightedRandomSampler(sample_weights, num_samples=16, replacement=True,
                                        generator=torch.Generator().manual_seed(0))
        loader = DataLoader(dataset, batch_size=8, sampler=sampler)
        net = nn.Linear(4, 3).to(device)
        """,
        cell="""
        for xb, yb in loader:
            loss = F.cross_entropy(net(xb.to(device)), yb.to(device))
        """,
        culprit="sampler.weights",
        target="cpu",
        checks=("sampler.weights",),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, openreg:0 and cpu!
    Case(
        id="kl-divergence-against-a-cpu-prior",
        url="https://github.com/nicola-decao/s-vae-pytorch/pull/4",
        classes=(3,),
        setup=OPENREG
        + """
        from torch.distributions import Normal, kl_divergence

        class Encoder(nn.Module):
            def __init__(self, d_in=12, d_z=4):
                super().__init__()
                self.net = nn.Linear(d_in, 2 * d_z)

            def forward(self, x):
                mu, log_sigma = self.net(x).chunk(2, dim=-1)
                return Normal(mu, log_sigma.exp())

        encoder = Encoder().to(device)
        prior = Normal(torch.zeros(4), torch.ones(4))
        x = torch.randn(6, 12, device=device)
        """,
        cell="""
        q = encoder(x)
        kl = kl_divergence(q, prior).sum(-1).mean()
        """,
        culprit="prior",
        target="openreg:0",
        checks=("kl",),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="loss-closure-capturing-cpu-class-weights",
        url="https://github.com/pytorch/pytorch/issues/130193",
        xfail="issue 27 mechanism 2: a closure's variable named as the function reads it (`class_weights in loss_fn`), where the author wants the function `loss_fn` (the fix runs)",
        classes=(2,),
        setup="""
        device = 'cuda'

        def make_loss(class_weights, smoothing=0.1):
            def loss_fn(logits, target):
                return F.cross_entropy(logits, target, weight=class_weights,
                                       label_smoothing=smoothing)
            return loss_fn

        loss_fn = make_loss(torch.tensor([1.0, 4.0, 2.0]))
        model = nn.Sequential(nn.Linear(10, 3)).to(device)
        xb, yb = torch.randn(8, 10, device=device), torch.randint(0, 3, (8,), device=device)
        """,
        cell="loss = loss_fn(model(xb), yb)\n",
        culprit="loss_fn",
        checks=("loss",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cpu and cuda:0!
    Case(
        id="torch-where-with-a-cpu-validity-mask",
        url="https://github.com/WenjieDu/PyPOTS/issues/3",
        classes=(0,),
        setup="""
        import numpy as np
        device = 'cuda'
        raw = np.array([[0.5, np.nan, 1.2, 0.3], [np.nan, 0.1, 0.2, np.nan]], dtype='float32')
        observed = torch.from_numpy(~np.isnan(raw))
        imputer = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 4)).to(device)
        x = torch.nan_to_num(torch.from_numpy(raw)).to(device)
        """,
        cell="""
        pred = imputer(x)
        filled = torch.where(observed, x, pred)
        """,
        culprit="observed",
        checks=("filled",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="plain-dict-of-encoders-not-a-moduledict",
        url="https://github.com/pytorch/pytorch/issues/29807",
        classes=(5,),
        setup="""
        device = 'cuda'

        class LateFusion(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoders = {'audio': nn.Linear(20, 8), 'video': nn.Linear(30, 8)}
                self.head = nn.Linear(16, 2)

            def forward(self, batch):
                feats = [self.encoders[k](batch[k]) for k in ('audio', 'video')]
                return self.head(torch.cat(feats, dim=-1))

        fusion = LateFusion().to(device)
        batch = {'audio': torch.randn(4, 20, device=device),
                 'video': torch.randn(4, 30, device=device)}
        """,
        cell="logits = fusion(batch)\n",
        culprit="fusion.encoders['audio']",
        checks=("logits",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="cached-property-frequencies-computed-before-the-move",
        url="https://github.com/Lightning-AI/pytorch-lightning/issues/1978",
        classes=(2,),
        setup="""
        from functools import cached_property
        device = 'cuda'

        class FourierFeatures(nn.Module):
            def __init__(self, d_in=2, n_freq=8, d_out=16):
                super().__init__()
                self.n_freq = n_freq
                self.proj = nn.Linear(2 * d_in * n_freq, d_out)

            @cached_property
            def freqs(self):
                return 2.0 ** torch.arange(self.n_freq) * torch.pi

            def forward(self, coords):
                ang = coords[..., None] * self.freqs
                return self.proj(torch.cat([ang.sin(), ang.cos()], -1).flatten(-2))

        ff = FourierFeatures()
        print(ff.freqs.shape)                # looked at once while building the model
        ff.to(device)
        coords = torch.rand(10, 2, device=device)
        """,
        cell="emb = ff(coords)\n",
        culprit="ff.freqs",
        checks=("emb",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="attribute-set-after-the-move",
        url="https://github.com/pytorch/pytorch/issues/45567",
        classes=(5,),
        setup="""
        device = 'cuda'

        class BiasedAttention(nn.Module):
            def __init__(self, d=16, n=6):
                super().__init__()
                self.qkv = nn.Linear(d, 3 * d)
                self.rel_bias = None

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, -1)
                scores = q @ k.transpose(-2, -1) / 4.0 + self.rel_bias
                return scores.softmax(-1) @ v

        layer = BiasedAttention().to(device)
        idx = torch.arange(6)
        layer.rel_bias = -(idx[None, :] - idx[:, None]).abs().float() * 0.1   # ALiBi-style
        x = torch.randn(2, 6, 16, device=device)
        """,
        cell="out = layer(x)\n",
        culprit="layer.rel_bias",
        checks=("out",),
    ),
    # Verified: Input and hidden tensors are not at the same device, found input tensor at
    # openreg:0 and hidden tensor at cpu
    Case(
        id="rnn-initial-state-made-in-forward-without-a-device",
        url="https://github.com/pytorch/pytorch/issues/2050",
        classes=(0,),
        setup=OPENREG
        + """
        class RNNClassifier(nn.Module):
            def __init__(self, d_in=5, hidden=24, n_classes=3):
                super().__init__()
                self.hidden = hidden
                self.rnn = nn.RNN(d_in, hidden, batch_first=True)
                self.fc = nn.Linear(hidden, n_classes)

            def forward(self, x):
                h0 = torch.zeros(1, x.size(0), self.hidden)
                out, _ = self.rnn(x, h0)
                return self.fc(out[:, -1])

        clf = RNNClassifier().to(device)
        series = torch.randn(4, 9, 5, device=device)
        """,
        cell="logits = clf(series)\n",
        culprit="h0 in RNNClassifier.forward",
        target="openreg:0",
        checks=("logits",),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cpu and cuda:0!
    Case(
        id="namespace-config-holding-class-weights",
        url="https://github.com/ImprintLab/Medical-SAM2/issues/78",
        classes=(3,),
        setup="""
        from types import SimpleNamespace
        device = 'cuda'
        cfg = SimpleNamespace(lr=1e-3, epochs=2, pos_weight=torch.tensor([4.0, 1.5, 9.0]))
        model = nn.Linear(12, 3).to(device)
        criterion = nn.BCEWithLogitsLoss(pos_weight=cfg.pos_weight).to(device)
        x = torch.randn(6, 12, device=device)
        y = torch.randint(0, 2, (6, 3), device=device).float()
        """,
        cell="""
        logits = model(x)
        loss = F.binary_cross_entropy_with_logits(logits, y, pos_weight=cfg.pos_weight)
        """,
        culprit="cfg.pos_weight",
        checks=("loss",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, openreg:0 and cpu!
    Case(
        id="custom-optimizer-state-made-without-a-device",
        url="https://github.com/facebookresearch/madgrad/issues/4",
        xfail="issue 27 mechanism 5: the state tensor the step met is named (`opt.state[net[0].weight]['momentum']`), where the author wants `opt.state` (the fix moves all of it and runs)",
        classes=(5,),
        setup=OPENREG
        + """
        class SignSGD(torch.optim.Optimizer):
            def __init__(self, params, lr=1e-2, beta=0.9):
                super().__init__(params, dict(lr=lr, beta=beta))
                for group in self.param_groups:
                    for p in group['params']:
                        self.state[p]['momentum'] = torch.zeros(p.shape)

            @torch.no_grad()
            def step(self):
                for group in self.param_groups:
                    for p in group['params']:
                        buf = self.state[p]['momentum']
                        buf.mul_(group['beta']).add_(p.grad, alpha=1 - group['beta'])
                        p.add_(buf.sign(), alpha=-group['lr'])

        net = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1)).to(device)
        opt = SignSGD(net.parameters())
        xb, yb = torch.randn(16, 6).to(device), torch.randn(16, 1).to(device)
        """,
        cell="""
        opt.zero_grad()
        loss = F.mse_loss(net(xb), yb)
        loss.backward()
        opt.step()
        """,
        culprit="opt.state",
        target="openreg:0",
        checks=("loss", "net[0].weight"),
        fake=False,
        standin=True,
    ),
    # -- other errors: the panel stays quiet ----------------------------------------------
    # Verified: a and b must have same reduction dim, but got [200, 13] X [17, 34].
    Case(
        id="quiet-egnn-feature-width-mismatch",
        url="https://github.com/talbenha/cell-tracker-gnn/issues/8",
        classes=(0,),
        setup="""
        from egnn_pytorch import EGNN
        device = 'cuda'
        layer = EGNN(dim=8, m_dim=16).to(device)
        feats = torch.randn(2, 10, 6, device=device)      # six atom features, the layer wants eight
        coors = torch.randn(2, 10, 3, device=device)
        """,
        cell="feats_out, coors_out = layer(feats, coors)\n",
        quiet=True,
        needs=("egnn_pytorch",),
    ),
    # Verified: IndexError: index out of range in self
    Case(
        id="quiet-torchkge-entity-id-past-the-table",
        url="https://github.com/thunlp/OpenKE/issues/370",
        classes=(0,),
        setup=OPENREG
        + """
        from torchkge.models import TransEModel
        model = TransEModel(emb_dim=16, n_entities=12, n_relations=3).to(device)
        h = torch.tensor([0, 4, 11]).to(device)
        t = torch.tensor([5, 12, 3]).to(device)        # entity 12 was added after the model was built
        r = torch.tensor([0, 2, 1]).to(device)
        """,
        cell="scores = model.scoring_function(h, t, r)\n",
        quiet=True,
        fake=False,
        standin=True,
        needs=("torchkge",),
    ),
    # Verified: Given groups=1, weight of size [8, 4, 3], expected input[2, 50, 6] to have 4
    # channels, but got 50 channels instead
    Case(
        id="quiet-tcn-fed-channels-last",
        url="https://github.com/locuslab/TCN/issues/62",
        classes=(0,),
        setup="""
        from pytorch_tcn import TCN
        device = 'cuda'
        tcn = TCN(num_inputs=4, num_channels=[8, 8], kernel_size=3, causal=True).to(device)
        batch = torch.randn(2, 50, 4, device=device)     # (batch, time, features) from a DataFrame
        """,
        cell="out = tcn(batch)\n",
        quiet=True,
        needs=("pytorch_tcn",),
    ),
    # Verified: AssertionError: Sequence length (27) needs to be divisible by target bucket
    # size  x 2 - 16
    Case(
        id="quiet-reformer-length-not-a-multiple-of-the-buckets",
        url="https://github.com/lucidrains/reformer-pytorch/issues/72",
        classes=(0,),
        setup="""
        from reformer_pytorch import ReformerLM
        device = 'cuda'
        lm = ReformerLM(num_tokens=50, dim=32, depth=1, max_seq_len=64, heads=2, bucket_size=8,
                        n_hashes=2, causal=True).to(device)
        tokens = torch.randint(0, 50, (2, 27), device=device)
        """,
        cell="logits = lm(tokens)\n",
        quiet=True,
        needs=("reformer_pytorch",),
    ),
]
