"""The fifth corpus, third blind batch (issue 27): code shapes and libraries the earlier
corpora do not use, expectations written before ipydevice ran on them, by an author who had
not read the engine.

Libraries new to the corpus: MONAI (``DiceCELoss``, ``DiceLoss``, ``UNet``, ``AutoEncoder``,
``MetaTensor`` built from small configs), entmax (``entmax15``, ``entmax_bisect``,
``sparsemax``), pytorch-metric-learning (its ``distances``), torchcde (cubic splines of
small paths), BoTorch (``SingleTaskGP``, ``ScalarizedPosteriorTransform``), nystrom-attention
and performer-pytorch.
Shapes: a loss module whose class weights are buffers, a sparsity schedule indexed by
device steps, ``scatter_`` and indexing into tables a helper makes without a device, an
``lru_cache`` mask, a class-level Butcher tableau, tensor default arguments, a closure's cell
read by a forward hook, a ``torch.distributions.Normal`` prior kept as an attribute, a
``SimpleNamespace``, a plain dict and a dataclass as holders, and an interpolation, a default
argument, a closure and a loss that keep the old tensor after the global is rebound.

This file: lookups and index operators (mechanism 1 of issue 27), tensors no variable names
(2), holders without ``.to()`` (3) and aliases (4); ``realworld_cases5b.py`` has the rest.
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
        id="monai-dicece-class-weights-never-moved",
        url="https://github.com/sacdallago/biotrainer/pull/62",
        classes=(1,),
        setup=OPENREG
        + """
        from monai.losses import DiceCELoss
        from monai.networks.nets import UNet
        net = UNet(spatial_dims=2, in_channels=1, out_channels=3, channels=(4, 8),
                   strides=(2,), num_res_units=0).to(device)
        class_weights = torch.tensor([0.2, 1.0, 2.5])    # background fills most slices
        loss_fn = DiceCELoss(to_onehot_y=True, softmax=True, weight=class_weights)
        img = torch.randn(2, 1, 8, 8).to(device)
        seg = torch.randint(0, 3, (2, 1, 8, 8)).to(device)
        """,
        cell="loss = loss_fn(net(img), seg)\n",
        culprit="loss_fn",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
        needs=("monai",),
    ),
    Case(
        id="entmax-alpha-schedule-indexed-by-device-steps",
        url="https://github.com/guoyww/AnimateDiff/issues/69",
        classes=(1,),
        setup=OPENREG
        + """
        from entmax import entmax_bisect
        alpha_schedule = torch.linspace(1.05, 2.0, 10)    # sparsity annealed over ten steps
        scorer = nn.Linear(8, 6).to(device)
        x = torch.randn(4, 8).to(device)
        t = torch.randint(0, 10, (4,)).to(device)
        """,
        cell="""
        alpha = alpha_schedule[t].unsqueeze(-1)
        p = entmax_bisect(scorer(x), alpha=alpha, dim=-1)
        """,
        culprit="alpha_schedule",
        target="openreg:0",
        checks=("alpha", "p"),
        fake=False,
        standin=True,
        needs=("entmax",),
    ),
    Case(
        id="knn-vote-scatters-into-a-cpu-table",
        url="https://github.com/facebookresearch/dino/issues/135",
        classes=(1, 2),
        setup=OPENREG
        + """
        from pytorch_metric_learning.distances import CosineSimilarity

        def knn_vote(query, bank, bank_labels, k=3, num_classes=4):
            sims = CosineSimilarity()(query, bank)
            top_sim, top_idx = sims.topk(k, dim=1)
            neighbours = bank_labels[top_idx]
            votes = torch.zeros(query.shape[0] * k, num_classes)
            votes.scatter_(1, neighbours.view(-1, 1), 1.0)
            return (votes.view(query.shape[0], k, num_classes) * top_sim.unsqueeze(-1)).sum(1)

        encoder = nn.Linear(10, 8).to(device)
        bank = encoder(torch.randn(12, 10).to(device)).detach()
        bank_labels = torch.randint(0, 4, (12,)).to(device)
        queries = torch.randn(5, 10).to(device)
        """,
        cell="scores = knn_vote(encoder(queries), bank, bank_labels)\n",
        culprit="votes in knn_vote",
        target="openreg:0",
        checks=("scores",),
        fake=False,
        standin=True,
        needs=("pytorch_metric_learning",),
    ),
    Case(
        id="hardest-negative-ids-from-a-cpu-arange",
        url="https://github.com/OML-Team/open-metric-learning/issues/369",
        classes=(1, 2),
        setup=OPENREG
        + """
        from pytorch_metric_learning.distances import LpDistance

        def hardest_negatives(emb, labels):
            dist = LpDistance()(emb)
            dist = dist.masked_fill(labels[:, None] == labels[None, :], float('inf'))
            ids = torch.arange(len(labels))
            return ids[dist.argmin(dim=1)]

        embedder = nn.Linear(6, 4).to(device)
        x = torch.randn(8, 6).to(device)
        y = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]).to(device)
        """,
        cell="""
        emb = embedder(x)
        neg = hardest_negatives(emb, y)
        loss = F.relu(1.0 - (emb - emb[neg]).pow(2).sum(1)).mean()
        """,
        culprit="ids in hardest_negatives",
        target="openreg:0",
        checks=("neg", "loss"),
        fake=False,
        standin=True,
        needs=("pytorch_metric_learning",),
    ),
    # -- 2. tensors no variable names -----------------------------------------------------
    Case(
        id="lru-cached-band-mask-for-entmax-attention",
        url="https://github.com/XPU-Forces/mojo_opset/pull/390",
        classes=(2,),
        setup="""
        device = 'cuda'
        from functools import lru_cache
        from entmax import entmax15

        @lru_cache(maxsize=None)
        def band_mask(n, width):
            i = torch.arange(n)
            return (i[:, None] - i[None, :]).abs() > width

        q = torch.randn(2, 6, 8, device=device)
        k = torch.randn(2, 6, 8, device=device)
        """,
        cell="""
        scores = q @ k.transpose(1, 2) / 8 ** 0.5
        attn = entmax15(scores.masked_fill(band_mask(6, 2), float('-inf')), dim=-1)
        """,
        culprit="band_mask(6, 2)",
        checks=("attn",),
        needs=("entmax",),
    ),
    Case(
        id="rk4-butcher-weights-on-the-class",
        url="https://github.com/thibmonsel/torchdde/issues/43",
        classes=(2,),
        setup=OPENREG
        + """
        import torchcde

        class RK4:
            B = torch.tensor([1.0, 2.0, 2.0, 1.0]) / 6     # the Butcher weights, made once

            def step(self, f, t, y, dt):
                k1 = f(t, y)
                k2 = f(t + dt / 2, y + dt / 2 * k1)
                k3 = f(t + dt / 2, y + dt / 2 * k2)
                k4 = f(t + dt, y + dt * k3)
                ks = torch.stack([k1, k2, k3, k4])
                return y + dt * (self.B.view(4, 1, 1) * ks).sum(0)

        hidden, channels = 5, 3
        coeffs = torchcde.natural_cubic_coeffs(torch.randn(2, 6, channels)).to(device)
        X = torchcde.CubicSpline(coeffs)
        field = nn.Linear(hidden, hidden * channels).to(device)

        def vector_field(t, z):
            dX = X.derivative(torch.tensor(t).to(device))
            return (field(z).tanh().view(-1, hidden, channels) @ dX.unsqueeze(-1)).squeeze(-1)

        solver = RK4()
        z0 = torch.zeros(2, hidden).to(device)
        """,
        cell="z1 = solver.step(vector_field, 0.0, z0, 0.5)\n",
        culprit="RK4.B",
        target="openreg:0",
        checks=("z1",),
        fake=False,
        standin=True,
        needs=("torchcde",),
    ),
    Case(
        id="channel-stats-as-default-arguments",
        url="https://github.com/UM-ARM-Lab/pytorch_kinematics/issues/39",
        classes=(2,),
        setup="""
        device = 'cuda'
        from monai.networks.nets import UNet

        def standardize(img, mean=torch.tensor([0.21, 0.35]).view(1, 2, 1, 1),
                        std=torch.tensor([0.11, 0.09]).view(1, 2, 1, 1)):
            return (img - mean) / std

        net = UNet(spatial_dims=2, in_channels=2, out_channels=2, channels=(4, 8),
                   strides=(2,), num_res_units=0).to(device)
        scans = torch.rand(2, 2, 8, 8, device=device)
        """,
        cell="logits = net(standardize(scans))\n",
        culprit="mean in standardize",
        checks=("logits",),
        needs=("monai",),
    ),
    Case(
        id="film-hook-closure-keeps-a-cpu-gamma",
        url="https://github.com/pytorch/pytorch/issues/24902",
        classes=(2,),
        setup=OPENREG
        + """
        from monai.networks.nets import UNet

        def make_film(num_channels, scale=1.5):
            gamma = torch.full((1, num_channels, 1, 1), scale)   # made when the hook is made
            def film(module, inputs, output):
                return output * gamma
            return film

        net = UNet(spatial_dims=2, in_channels=1, out_channels=2, channels=(4, 8),
                   strides=(2,), num_res_units=0).to(device)
        net.register_forward_hook(make_film(2))
        x = torch.randn(2, 1, 8, 8).to(device)
        """,
        cell="out = net(x)\n",
        culprit="gamma in film",
        target="openreg:0",
        checks=("out",),
        fake=False,
        standin=True,
        needs=("monai",),
    ),
    # -- 3. holders without .to() ---------------------------------------------------------
    Case(
        id="vae-normal-prior-kept-as-an-attribute",
        url="https://github.com/pytorch/pytorch/issues/12082",
        classes=(3,),
        setup=OPENREG
        + """
        from torch.distributions import Normal, kl_divergence

        class TinyVAE(nn.Module):
            def __init__(self, d=6, z=2):
                super().__init__()
                self.enc = nn.Linear(d, 2 * z)
                self.dec = nn.Linear(z, d)
                self.prior = Normal(torch.zeros(z), torch.ones(z))

            def forward(self, x):
                mu, log_sigma = self.enc(x).chunk(2, -1)
                q = Normal(mu, log_sigma.exp())
                return self.dec(q.rsample()), kl_divergence(q, self.prior).sum(-1)

        vae = TinyVAE().to(device)
        x = torch.randn(4, 6).to(device)
        """,
        cell="""
        recon, kl = vae(x)
        loss = F.mse_loss(recon, x) + kl.mean()
        """,
        culprit="vae.prior",
        target="openreg:0",
        checks=("kl", "loss"),
        fake=False,
        standin=True,
    ),
    Case(
        id="botorch-scalarization-weights-in-a-namespace",
        xfail="issue 27 mechanism 3: named `pt` (the transform holding the tensor) where the case wants the config `cfg.weights` the user wrote; no fix",
        url="https://github.com/xopt-org/Xopt/issues/311",
        classes=(3,),
        setup=OPENREG
        + """
        from types import SimpleNamespace
        from botorch.models import SingleTaskGP
        from botorch.acquisition.objective import ScalarizedPosteriorTransform

        cfg = SimpleNamespace(weights=torch.tensor([1.0, -0.5], dtype=torch.double), n_candidates=5)
        train_X = torch.rand(8, 2, dtype=torch.double).to(device)
        train_Y = torch.stack([train_X.sum(-1), (train_X ** 2).sum(-1)], -1)
        gp = SingleTaskGP(train_X, train_Y).eval()
        X_cand = torch.rand(cfg.n_candidates, 2, dtype=torch.double).to(device)
        """,
        cell="""
        pt = ScalarizedPosteriorTransform(weights=cfg.weights)
        mean = gp.posterior(X_cand, posterior_transform=pt).mean
        """,
        culprit="cfg.weights",
        target="openreg:0",
        checks=("mean",),
        fake=False,
        standin=True,
        needs=("botorch",),
    ),
    Case(
        id="target-stats-dict-denormalizes-nystrom-output",
        url="https://github.com/Emmi-AI/noether/pull/156",
        classes=(3,),
        setup="""
        device = 'cuda'
        from nystrom_attention import NystromAttention
        stats = {'mean': torch.tensor([300.0, 1.2]), 'std': torch.tensor([25.0, 0.3])}
        attn = NystromAttention(dim=16, dim_head=8, heads=2, num_landmarks=4,
                                pinv_iterations=2).to(device)
        head = nn.Linear(16, 2).to(device)
        tokens = torch.randn(3, 8, 16, device=device)
        """,
        cell="""
        pooled = attn(tokens).mean(1)
        pred = head(pooled) * stats['std'] + stats['mean']
        """,
        culprit="stats['std']",
        checks=("pred",),
        needs=("nystrom_attention",),
    ),
    Case(
        id="dataclass-batch-of-spline-coefficients",
        url="https://github.com/teamtomo/torch-cubic-spline-grids/pull/13",
        classes=(3,),
        setup=OPENREG
        + """
        from dataclasses import dataclass
        import torchcde

        @dataclass
        class IrregularBatch:
            times: torch.Tensor
            coeffs: torch.Tensor
            y: torch.Tensor

        class CDEReadout(nn.Module):
            def __init__(self, channels=2, hidden=4):
                super().__init__()
                self.initial = nn.Linear(channels, hidden)
                self.readout = nn.Linear(hidden, 1)

            def forward(self, coeffs, times):
                X = torchcde.CubicSpline(coeffs, t=times)
                return self.readout(self.initial(X.evaluate(times[-1])).tanh())

        times = torch.linspace(0, 1, 7)
        raw = torch.randn(3, 7, 2)
        batch = IrregularBatch(times, torchcde.natural_cubic_coeffs(raw, t=times), torch.randn(3, 1))
        model = CDEReadout().to(device)
        """,
        cell="""
        pred = model(batch.coeffs, batch.times)
        loss = F.mse_loss(pred, batch.y)
        """,
        culprit="batch.coeffs",
        target="openreg:0",
        checks=("pred", "loss"),
        fake=False,
        standin=True,
        needs=("torchcde",),
    ),
    # -- 4. aliases -------------------------------------------------------------------------
    Case(
        id="cubic-spline-built-before-the-coeffs-moved",
        xfail="issue 27 mechanism 4: a spline built before its coefficients moved: `initial` named, target cpu, where the case wants `X` moved to openreg:0",
        url="https://github.com/teamtomo/torch-cubic-spline-grids/pull/15",
        classes=(4,),
        setup=OPENREG
        + """
        import torchcde
        coeffs = torchcde.natural_cubic_coeffs(torch.randn(4, 6, 3))
        X = torchcde.CubicSpline(coeffs)     # the interpolation is built once...
        coeffs = coeffs.to(device)           # ...and the coefficients moved afterwards
        initial = nn.Linear(3, 8).to(device)
        """,
        cell="z0 = initial(X.evaluate(X.interval[0]))\n",
        culprit="X",
        target="openreg:0",
        checks=("z0",),
        fake=False,
        standin=True,
        needs=("torchcde",),
    ),
    Case(
        id="sparsemax-loss-default-keeps-the-old-class-weights",
        url="https://github.com/pytorch/pytorch/issues/69214",
        classes=(4, 2),
        setup=OPENREG
        + """
        from entmax import sparsemax
        class_w = torch.tensor([1.0, 2.0, 0.5, 1.0])

        def sparse_loss(logits, target, w=class_w):
            p = sparsemax(logits, dim=-1)
            return (((p - F.one_hot(target, 4)) ** 2) * w).sum(-1).mean()

        class_w = class_w.to(device)      # moved after the loss took it as its default
        clf = nn.Linear(5, 4).to(device)
        x = torch.randn(3, 5).to(device)
        y = torch.tensor([0, 3, 1]).to(device)
        """,
        cell="loss = sparse_loss(clf(x), y)\n",
        culprit="w in sparse_loss",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
        needs=("entmax",),
    ),
    Case(
        id="vocab-restriction-closure-keeps-the-old-mask",
        url="https://github.com/huggingface/transformers/pull/38558",
        classes=(4, 2),
        setup=OPENREG
        + """
        from entmax import sparsemax
        vocab_keep = torch.zeros(12, dtype=torch.bool)
        vocab_keep[:8] = True                     # the last four ids are reserved tokens

        def make_restrict(keep):
            def restrict(logits):
                return logits.masked_fill(~keep, float('-inf'))
            return restrict

        restrict = make_restrict(vocab_keep)
        vocab_keep = vocab_keep.to(device)        # moved after the closure captured it
        lm_head = nn.Linear(16, 12).to(device)
        h = torch.randn(3, 16).to(device)
        """,
        cell="probs = sparsemax(restrict(lm_head(h)), dim=-1)\n",
        culprit="keep in restrict",
        target="openreg:0",
        checks=("probs",),
        fake=False,
        standin=True,
        needs=("entmax",),
    ),
    Case(
        id="spectral-loss-keeps-the-cpu-frequency-weights",
        url="https://github.com/bernardo-torres/spectral-optimal-transport/issues/3",
        classes=(4, 3),
        setup=OPENREG
        + """
        class SpectralLoss(nn.Module):
            def __init__(self, freq_weights):
                super().__init__()
                self.freq_weights = freq_weights          # a plain attribute, not a buffer

            def forward(self, pred, target):
                P, T = torch.fft.rfft(pred).abs(), torch.fft.rfft(target).abs()
                return ((P - T) ** 2 * self.freq_weights).mean()

        freq_weights = torch.linspace(1.0, 0.1, 9)
        spec_loss = SpectralLoss(freq_weights)
        freq_weights = freq_weights.to(device)
        spec_loss = spec_loss.to(device)                  # moves no plain attribute
        synth = nn.Linear(4, 16).to(device)
        z = torch.randn(3, 4).to(device)
        target_wave = torch.randn(3, 16).to(device)
        """,
        cell="loss = spec_loss(synth(z), target_wave)\n",
        culprit="spec_loss.freq_weights",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
    ),
]
