"""The tenth corpus, eighth blind batch (issue 27), continued: plain PyTorch shapes the corpus
lacked and the batch's quiet cases. See ``realworld_cases10.py``.

Shapes: a positional bias read by a function run under activation checkpointing, feature
statistics a forward hook accumulates into a dict on the CPU, a ``WeightedRandomSampler`` given
weights computed on the device and a CPU ``torch.Generator`` for reproducibility (the CPU is the
target), the interpolation coefficients of a WGAN-GP gradient penalty drawn inside a helper, a
weight matrix read as a global by an energy function under ``torch.func.grad``, labels a batch
generator reads from a global, a new head put into ``model.module`` of a ``DataParallel``
wrapper after the move, a causal mask memoised with ``functools.lru_cache``, a pruning mask
handed to a custom parametrization that keeps it as a plain attribute, running statistics in a
dataclass, a prior ``torch.distributions.Normal`` built without a device, bucket edges captured
in a closure, an ``istft`` window made once on the CPU for complex spectrogram masking, gallery
features cached on the CPU for a retrieval metric, a focal-loss class table indexed by device
targets in a training step, and the last valid step gathered with lengths a ``collate_fn`` made.
Quiet cases: a torchjd ``Constant`` aggregator with one weight too few for its tasks, a
conformer block given a mask of the wrong length, a ptwt ``wavedec2`` on a 1-D signal, a
torchinterp1d query of another batch size, and a learning-rate range test asked for a step mode
it does not have.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

CASES: list[Case] = [
    # -- plain PyTorch --------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="checkpointed-block-reads-a-cpu-position-bias",
        url="https://github.com/pytorch/pytorch/issues/124788",
        classes=(0,),
        setup="""
        from torch.utils.checkpoint import checkpoint
        device = 'cuda'
        blocks = nn.ModuleList([nn.Sequential(nn.LayerNorm(32), nn.Linear(32, 32), nn.GELU())
                                for _ in range(3)]).to(device)
        pos_bias = torch.randn(16, 32) * 0.02          # learned offline, loaded from a .npy

        def run_block(block, h):
            return h + block(h + pos_bias)

        x = torch.randn(4, 16, 32, device=device)
        """,
        cell="""
        h = x
        for block in blocks:
            h = checkpoint(run_block, block, h, use_reentrant=False)
        pooled = h.mean(1)
        """,
        culprit="pos_bias",
        checks=("h", "pooled"),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cpu and cuda:0!
    Case(
        id="forward-hook-accumulates-stats-into-a-cpu-dict",
        url="https://github.com/vllm-project/llm-compressor/pull/1426",
        xfail="issue 27 mechanism 3: the dict's item is named (`stats['sum']`) where the author names the dict a hook fills; the fix moves the dict and runs",
        classes=(0,),
        setup="""
        device = 'cuda'
        net = nn.Sequential(nn.Linear(12, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                            nn.Linear(64, 3)).to(device)
        stats = {'sum': torch.zeros(64), 'sq_sum': torch.zeros(64), 'n': 0}

        def record(module, inputs, output):
            stats['sum'] += output.sum(0)
            stats['sq_sum'] += output.pow(2).sum(0)
            stats['n'] += output.shape[0]

        handle = net[3].register_forward_hook(record)
        calib = torch.randn(32, 12, device=device)
        """,
        cell="""
        logits = net(calib)
        mean = stats['sum'] / stats['n']
        var = stats['sq_sum'] / stats['n'] - mean ** 2
        """,
        culprit="stats",
        checks=("logits", "mean", "var"),
    ),
    # Verified: Expected a 'openreg' device type for generator but found 'cpu'
    Case(
        id="weighted-sampler-weights-computed-on-the-device",
        url="https://github.com/amdegroot/ssd.pytorch/issues/578",
        xfail="issue 27 mechanism 7: a sampler's device weights with a CPU generator get no culprit (as the eighth corpus's sampler)",
        classes=(0,),
        setup=OPENREG
        + """
        labels = torch.randint(0, 3, (40,)).to(device)
        feats = torch.randn(40, 6)
        class_counts = torch.bincount(labels, minlength=3).float()
        sample_weights = (1.0 / class_counts)[labels]          # rare classes drawn more often
        sampler = torch.utils.data.WeightedRandomSampler(
            sample_weights, num_samples=40, generator=torch.Generator().manual_seed(0))
        loader = DataLoader(TensorDataset(feats, torch.arange(40)), batch_size=8, sampler=sampler)
        model = nn.Linear(6, 3).to(device)
        """,
        cell="""
        for xb, idx in loader:
            logits = model(xb.to(device))
        seen = idx
        """,
        culprit="sampler.weights",
        target="cpu",
        checks=("sampler.weights", "seen"),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # openreg:0 and cpu!
    Case(
        id="wgan-gp-interpolation-alpha-drawn-in-the-helper",
        url="https://github.com/aladdinpersson/Machine-Learning-Collection/issues/58",
        classes=(0,),
        setup=OPENREG
        + """
        critic = nn.Sequential(nn.Linear(16, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1)).to(device)
        generator = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 16)).to(device)
        opt_c = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.5, 0.9))

        def gradient_penalty(critic, real, fake):
            alpha = torch.rand(real.size(0), 1)
            mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
            grads = torch.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)[0]
            return ((grads.norm(2, dim=1) - 1) ** 2).mean()

        real = torch.randn(8, 16).to(device)
        z = torch.randn(8, 8).to(device)
        """,
        cell="""
        fake = generator(z).detach()
        loss_c = critic(fake).mean() - critic(real).mean()
        gp = gradient_penalty(critic, real, fake)
        opt_c.zero_grad()
        (loss_c + 10 * gp).backward()
        opt_c.step()
        """,
        culprit="alpha in gradient_penalty",
        target="openreg:0",
        checks=("gp", "critic[0].weight.grad"),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but got mat2 is on cpu,
    # different from other tensors on openreg:0 (when checking argument in method
    # wrapper_PrivateUse1_out_mm)
    Case(
        id="func-grad-energy-reads-a-global-weight-matrix",
        url="https://github.com/pytorch/functorch/issues/817",
        classes=(0,),
        setup=OPENREG
        + """
        from torch.func import grad, vmap
        coupling = torch.randn(3, 3) * 0.1              # pair couplings, fitted on the CPU

        def energy(pos):
            return 0.5 * (pos @ coupling * pos).sum() + pos.pow(4).sum()

        pos = torch.randn(10, 3).to(device)
        """,
        cell="""
        forces = -vmap(grad(energy))(pos)
        pos_next = pos + 0.01 * forces
        """,
        culprit="coupling",
        target="openreg:0",
        checks=("forces", "pos_next"),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="batch-generator-reads-global-labels",
        url="https://github.com/graphnet-team/graphnet/issues/328",
        xfail="issue 27 mechanism 2: a generator's local slice (`yb`) is named where the author names the global it slices (`labels`); the fix runs",
        classes=(0,),
        setup="""
        device = 'cuda'
        feats = torch.randn(48, 20).to(device)        # cached backbone features
        labels = torch.randint(0, 4, (48,))

        def batches(batch_size=16):
            perm = torch.randperm(len(feats))
            for idx in perm.split(batch_size):
                yield feats[idx], labels[idx]

        probe = nn.Linear(20, 4).to(device)
        """,
        cell="""
        for xb, yb in batches():
            logits = probe(xb)
            loss = F.cross_entropy(logits, yb)
        acc = (logits.argmax(1) == yb).float().mean()
        """,
        culprit="labels",
        checks=("logits", "loss", "acc"),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="dataparallel-new-head-put-into-module-after-the-move",
        url="https://github.com/rasbt/LLMs-from-scratch/issues/172",
        classes=(0,),
        setup="""
        device = 'cuda'

        class Backbone(nn.Module):
            def __init__(self):
                super().__init__()
                self.features = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
                self.fc = nn.Linear(32, 100)

            def forward(self, x):
                return self.fc(self.features(x))

        model = nn.DataParallel(Backbone()).to(device)
        # fine-tune on the 5 classes of the new task
        model.module.fc = nn.Linear(32, 5)
        xb = torch.randn(8, 10).to(device)
        yb = torch.randint(0, 5, (8,)).to(device)
        """,
        cell="""
        logits = model(xb)
        loss = F.cross_entropy(logits, yb)
        """,
        culprit="model.module.fc",
        checks=("logits", "loss"),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="lru-cached-causal-mask-built-on-the-cpu",
        url="https://github.com/pytorch/torchtitan/pull/2117",
        xfail="issue 27 mechanism 2: the cached call's result is named as the method reads it where the author names the cached function; the fix (device= in the function, the cache cleared) runs",
        classes=(0,),
        setup="""
        from functools import lru_cache
        device = 'cuda'

        @lru_cache(maxsize=8)
        def causal_mask(n):
            return torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)

        class TinyCausalAttention(nn.Module):
            def __init__(self, dim=32):
                super().__init__()
                self.qkv = nn.Linear(dim, 3 * dim)
                self.out = nn.Linear(dim, dim)

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, -1)
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
                scores = scores.masked_fill(causal_mask(x.shape[1]), float('-inf'))
                return self.out(scores.softmax(-1) @ v)

        attn = TinyCausalAttention().to(device)
        x = torch.randn(2, 12, 32, device=device)
        """,
        cell="""
        y = attn(x)
        next_token_feats = y[:, -1]
        """,
        culprit="causal_mask",
        checks=("y", "next_token_feats"),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="custom-parametrization-mask-plain-attribute",
        url="https://github.com/lezcano/geotorch/pull/50",
        xfail="issue 27 mechanism 2: the plain mask of a parametrization registered before the move is named; its first fix, `register_buffer` in the class, needs the parametrization made again, which the re-run does not do",
        classes=(0,),
        setup="""
        import torch.nn.utils.parametrize as parametrize
        device = 'cuda'

        class Masked(nn.Module):
            def __init__(self, mask):
                super().__init__()
                self.mask = mask

            def forward(self, W):
                return W * self.mask

        model = nn.Sequential(nn.Linear(20, 20), nn.ReLU(), nn.Linear(20, 2)).to(device)
        mask = (torch.rand(20, 20) > 0.5).float()          # 50% unstructured sparsity
        x = torch.randn(6, 20, device=device)
        """,
        cell="""
        parametrize.register_parametrization(model[0], 'weight', Masked(mask))
        out = model(x)
        density = (model[0].weight != 0).float().mean()
        """,
        culprit="mask",
        checks=("out", "density"),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cpu and cuda:0!
    Case(
        id="running-stats-dataclass-made-without-a-device",
        url="https://github.com/inverted-ai/torchdrivesim/pull/103",
        xfail="issue 27 mechanism 3: the dataclass's field is named (`obs_stats.mean`) where the author names the dataclass; the fix moves its tensor fields and runs",
        classes=(0,),
        setup="""
        from dataclasses import dataclass, field
        device = 'cuda'

        @dataclass
        class RunningStats:
            dim: int
            mean: torch.Tensor = None
            var: torch.Tensor = None
            momentum: float = 0.01

            def __post_init__(self):
                self.mean = torch.zeros(self.dim)
                self.var = torch.ones(self.dim)

            def update(self, x):
                self.mean = (1 - self.momentum) * self.mean + self.momentum * x.mean(0)
                self.var = (1 - self.momentum) * self.var + self.momentum * x.var(0)

            def normalize(self, x):
                return (x - self.mean) / (self.var + 1e-5).sqrt()

        obs_stats = RunningStats(dim=8)
        policy = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 2)).to(device)
        obs = torch.randn(16, 8, device=device)
        """,
        cell="""
        obs_stats.update(obs)
        action_logits = policy(obs_stats.normalize(obs))
        """,
        culprit="obs_stats",
        checks=("action_logits", "obs_stats.mean"),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # openreg:0 and cpu!
    Case(
        id="vae-prior-normal-built-without-a-device",
        url="https://github.com/jiacheng-xu/vmf_vae_nlp/pull/1",
        classes=(0,),
        setup=OPENREG
        + """
        from torch.distributions import Normal, kl_divergence
        latent = 4
        prior = Normal(torch.zeros(latent), torch.ones(latent))
        encoder = nn.Linear(12, 2 * latent).to(device)
        decoder = nn.Linear(latent, 12).to(device)
        x = torch.randn(8, 12).to(device)
        """,
        cell="""
        mu, log_sigma = encoder(x).chunk(2, -1)
        q = Normal(mu, log_sigma.exp())
        z = q.rsample()
        recon = decoder(z)
        kl = kl_divergence(q, prior).sum(-1).mean()
        loss = F.mse_loss(recon, x) + 0.1 * kl
        """,
        culprit="prior",
        target="openreg:0",
        checks=("kl", "loss"),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="bucket-edges-captured-in-a-closure",
        url="https://github.com/HorizonRobotics/alf/pull/472",
        xfail="issue 27 mechanism 2: the closure's variable is named as the function reads it (`edges in binner`, as the fourth corpus names it) where the author names the function; the fix runs",
        classes=(0,),
        setup="""
        device = 'cuda'

        def make_binner(edges):
            def binner(x):
                return torch.bucketize(x, edges)
            return binner

        binner = make_binner(torch.linspace(-2, 2, 9))      # 10 buckets for the age feature
        bucket_emb = nn.Embedding(10, 16).to(device)
        mlp = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
        age = torch.randn(32).to(device)
        """,
        cell="""
        ids = binner(age)
        pred = mlp(bucket_emb(ids)).squeeze(-1)
        """,
        culprit="binner",
        checks=("ids", "pred"),
    ),
    # Verified: istft input and window must be on the same device but got self on openreg:0
    # and window on cpu
    Case(
        id="istft-window-made-once-on-the-cpu",
        url="https://github.com/rishikksh20/iSTFTNet-pytorch/issues/14",
        classes=(0,),
        setup=OPENREG
        + """
        n_fft, hop = 128, 32
        window = torch.hann_window(n_fft)
        mask_net = nn.Sequential(nn.Linear(n_fft // 2 + 1, 64), nn.ReLU(),
                                 nn.Linear(64, n_fft // 2 + 1), nn.Sigmoid()).to(device)
        noisy = torch.randn(2, 2048).to(device)
        """,
        cell="""
        spec = torch.stft(noisy, n_fft, hop, window=window.to(device), return_complex=True)
        mask = mask_net(spec.abs().transpose(1, 2)).transpose(1, 2)
        enhanced = torch.istft(spec * mask, n_fft, hop, window=window, length=noisy.shape[-1])
        """,
        culprit="window",
        target="openreg:0",
        checks=("spec", "enhanced"),
        fake=False,
        standin=True,
    ),
    # Verified: X1 and X2 must have the same device type. X1: cuda X2: cpu
    Case(
        id="retrieval-gallery-features-cached-on-the-cpu",
        url="https://github.com/nixingyang/FlipReID/issues/12",
        classes=(0,),
        setup="""
        device = 'cuda'
        embed = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 32)).to(device)
        gallery_cache = {}
        with torch.no_grad():       # embedded once per epoch, kept off the GPU to save memory
            gallery_cache['feats'] = F.normalize(embed(torch.randn(100, 24).to(device)), dim=1).cpu()
            gallery_cache['ids'] = torch.randint(0, 10, (100,))
        queries = torch.randn(12, 24).to(device)
        """,
        cell="""
        q = F.normalize(embed(queries), dim=1)
        dists = torch.cdist(q, gallery_cache['feats'])
        top5 = dists.topk(5, largest=False).indices
        """,
        culprit="gallery_cache['feats']",
        checks=("dists", "top5"),
    ),
    # Verified: indices should be either on cpu or on the same device as the indexed tensor
    # (cpu)
    Case(
        id="focal-loss-alpha-table-indexed-by-device-targets",
        url="https://github.com/clcarwin/focal_loss_pytorch/pull/16",
        classes=(0,),
        setup=OPENREG
        + """
        alpha = torch.tensor([0.25, 0.5, 0.25])          # per-class balance of the focal loss

        def focal_loss(logits, targets, gamma=2.0):
            logp = logits.log_softmax(-1).gather(1, targets[:, None]).squeeze(1)
            weight = alpha[targets] * (1 - logp.exp()) ** gamma
            return -(weight * logp).mean()

        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        xb = torch.randn(12, 8).to(device)
        yb = torch.randint(0, 3, (12,)).to(device)
        """,
        cell="""
        loss = focal_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        """,
        culprit="alpha",
        target="openreg:0",
        checks=("loss", "model[0].weight.grad"),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but got index is on cpu,
    # different from other tensors on openreg:0 (when checking argument in method
    # wrapper_PrivateUse1_out_gather)
    Case(
        id="collate-fn-lengths-gather-last-step",
        url="https://github.com/Tencent/NeuralNLP-NeuralClassifier/issues/125",
        classes=(0,),
        setup=OPENREG
        + """
        from torch.nn.utils.rnn import pad_sequence

        def collate(items):
            seqs = [s for s, _ in items]
            return {'x': pad_sequence(seqs, batch_first=True),
                    'lengths': torch.tensor([len(s) for s in seqs]),
                    'y': torch.stack([y for _, y in items])}

        data = [(torch.randn(n, 6), torch.tensor(n % 2)) for n in (5, 9, 7, 3, 8, 6)]
        loader = DataLoader(data, batch_size=3, collate_fn=collate)
        step_enc = nn.Linear(6, 16).to(device)      # a running-mean encoder over time steps
        head = nn.Linear(16, 2).to(device)
        """,
        cell="""
        for batch in loader:
            h = torch.tanh(step_enc(batch['x'].to(device)))
            out = h.cumsum(1) / torch.arange(1, h.shape[1] + 1, device=device)[:, None]
            last = out.gather(1, (batch['lengths'] - 1).view(-1, 1, 1).expand(-1, 1, 16))
            logits = head(last.squeeze(1))
            loss = F.cross_entropy(logits, batch['y'].to(device))
        """,
        culprit="batch['lengths']",
        target="openreg:0",
        checks=("logits", "loss"),
        fake=False,
        standin=True,
    ),
    # -- other errors: the panel stays quiet ----------------------------------------------
    # Verified: ValueError: Parameter `matrix` should have 2 rows (the number of specified
    # weights). Found `matrix` with 3 rows.
    Case(
        id="quiet-torchjd-constant-weights-one-task-short",
        url="https://github.com/SimplexLab/TorchJD/issues/20",
        classes=(0,),
        setup=OPENREG
        + """
        from torchjd.aggregation import Constant
        from torchjd.autojac import backward, jac_to_grad
        shared = nn.Linear(10, 16).to(device)
        heads = nn.ModuleList([nn.Linear(16, 1) for _ in range(3)]).to(device)
        params = [*shared.parameters(), *heads.parameters()]
        aggregator = Constant(torch.tensor([0.5, 0.5], device=device))   # written for two tasks
        x = torch.randn(8, 10, device=device)
        """,
        cell="""
        h = shared(x).relu()
        losses = [head(h).pow(2).mean() for head in heads]
        backward(losses)
        jac_to_grad(params, aggregator)
        """,
        quiet=True,
        fake=False,
        standin=True,
        needs=("torchjd",),
    ),
    # Verified: Attempting to broadcast a dimension of length 24 at -1! Mismatching argument
    # at index 1 had torch.Size([2, 1, 24, 24]); but expected shape should be broadcastable to
    # [2, 4, 20, 20]
    Case(
        id="quiet-conformer-mask-of-the-wrong-length",
        url="https://github.com/sooftware/conformer/issues/31",
        classes=(0,),
        setup="""
        from conformer import ConformerBlock
        device = 'cuda'
        block = ConformerBlock(dim=32, dim_head=8, heads=4, conv_kernel_size=7).to(device).eval()
        feats = torch.randn(2, 20, 32, device=device)
        mask = torch.ones(2, 24, dtype=torch.bool, device=device)    # padded to the longest clip
        """,
        cell="""
        out = block(feats, mask=mask)
        """,
        quiet=True,
        needs=("conformer",),
    ),
    # Verified: ValueError: At least 2 input dimensions required.
    Case(
        id="quiet-ptwt-wavedec2-on-a-1d-signal",
        url="https://github.com/v0lta/PyTorch-Wavelet-Toolbox/issues/40",
        classes=(0,),
        setup="""
        import ptwt
        device = 'cuda'
        signal = torch.randn(256, device=device)
        """,
        cell="""
        coeffs = ptwt.wavedec2(signal, 'db2', level=2)
        """,
        quiet=True,
        needs=("ptwt",),
    ),
    # Verified: torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1
    # dimensions of boundaries tensor and input value tensor must match, but we got boundaries
    # tensor [4, 30] and input value tensor [3, 50]
    Case(
        id="quiet-interp1d-query-of-another-batch-size",
        url="https://github.com/pmelchior/spender/issues/54",
        classes=(0,),
        setup="""
        from torchinterp1d import interp1d
        device = 'cuda'
        t = torch.linspace(0, 1, 30, device=device).expand(4, -1)
        y = torch.randn(4, 30, device=device)
        t_new = torch.rand(3, 50, device=device)          # three query rows for four series
        """,
        cell="""
        y_new = interp1d(t, y, t_new)
        """,
        quiet=True,
        needs=("torchinterp1d",),
    ),
    # Verified: ValueError: expected one of (exp, linear), got cosine
    Case(
        id="quiet-lr-finder-unknown-step-mode",
        url="https://github.com/davidtvs/pytorch-lr-finder/issues/55",
        classes=(0,),
        setup=OPENREG
        + """
        from torch_lr_finder import LRFinder
        model = nn.Linear(10, 3).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        lr_finder = LRFinder(model, optimizer, nn.CrossEntropyLoss(), device=device)
        loader = DataLoader(TensorDataset(torch.randn(32, 10), torch.randint(0, 3, (32,))),
                            batch_size=8)
        """,
        cell="""
        lr_finder.range_test(loader, end_lr=10, num_iter=4, step_mode='cosine')
        """,
        quiet=True,
        fake=False,
        standin=True,
        needs=("torch_lr_finder",),
    ),
]
