"""The third corpus, first blind batch (issue 27): code shapes and libraries the first
two corpora do not use, expectations written before ipydevice ran on them.

This file: lookups and index operators (mechanism 1 of issue 27), tensors no variable
names (2), holders without ``.to()`` (3), aliases (4) and a module list's path (5);
``realworld_cases3b.py`` has the rest. ``classes`` names the mechanisms of issue 27 a case exercises (0: none). Cases
on ``openreg`` (``standin=True``) are those whose library or fix reads tensor values, or
whose error fake CUDA does not raise (indexing's "indices should be either on cpu or on
the same device as the indexed tensor", a convolution's input); ``openreg:0`` stands for
the report's GPU. A case the package got wrong on its first run carries
``xfail="issue 27 mechanism N: ..."``.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

CASES: list[Case] = [
    # -- 1. lookups and index operators ---------------------------------------------------
    Case(
        id="schedule-helper-indexed-by-timesteps",
        url="https://github.com/modelscope/modelscope/issues/220",
        classes=(1,),
        setup=OPENREG
        + """
        def _i(tensor, t, x):
            shape = (x.size(0),) + (1,) * (x.ndim - 1)
            return tensor[t].view(shape).to(x)

        class GaussianDiffusion:
            def __init__(self, betas):
                alphas_cumprod = torch.cumprod(1 - betas, dim=0)
                self.sqrt_alphas_cumprod = alphas_cumprod.sqrt()
                self.sqrt_one_minus_alphas_cumprod = (1 - alphas_cumprod).sqrt()

            def q_sample(self, x0, t, noise):
                return (_i(self.sqrt_alphas_cumprod, t, x0) * x0
                        + _i(self.sqrt_one_minus_alphas_cumprod, t, x0) * noise)

        diffusion = GaussianDiffusion(torch.linspace(1e-4, 0.02, 50))
        x0 = torch.randn(2, 1, 4, 4).to(device)
        t = torch.tensor([3, 40]).to(device)
        noise = torch.randn_like(x0)
        """,
        cell="xt = diffusion.q_sample(x0, t, noise)\n",
        culprit="diffusion.sqrt_alphas_cumprod",
        target="openreg:0",
        checks=("xt",),
        fake=False,
        standin=True,
    ),
    Case(
        id="extract-gathers-a-schedule-kept-as-attribute",
        url="https://github.com/CompVis/latent-diffusion/pull/282",
        classes=(1,),
        setup=OPENREG
        + """
        def extract(a, t, x_shape):
            out = a.gather(-1, t)
            return out.reshape(t.shape[0], *((1,) * (len(x_shape) - 1)))

        class DDPM(nn.Module):
            def __init__(self, steps=20):
                super().__init__()
                self.net = nn.Conv2d(1, 1, 3, padding=1)
                betas = torch.linspace(1e-4, 0.02, steps)
                self.sqrt_alphas_cumprod = torch.cumprod(1 - betas, 0).sqrt()

            def q_sample(self, x0, t, noise):
                a = extract(self.sqrt_alphas_cumprod, t, x0.shape)
                return a * x0 + (1 - a * a).sqrt() * noise

        ddpm = DDPM().to(device)
        x0 = torch.randn(3, 1, 4, 4, device=device)
        t = torch.randint(0, 20, (3,), device=device)
        noise = torch.randn_like(x0)
        """,
        cell="xt = ddpm.q_sample(x0, t, noise)\npred = ddpm.net(xt)\n",
        culprit="ddpm.sqrt_alphas_cumprod",
        target="openreg:0",
        checks=("xt", "pred"),
        fake=False,
        standin=True,
    ),
    Case(
        id="focal-loss-alpha-gathered-by-labels",
        url="https://github.com/yatengLG/Focal-Loss-Pytorch/issues/17",
        classes=(1,),
        setup="""
        class FocalLoss(nn.Module):
            def __init__(self, alpha, gamma=2.0):
                super().__init__()
                self.alpha = torch.tensor(alpha)
                self.gamma = gamma

            def forward(self, logits, labels):
                logp = F.log_softmax(logits, -1).gather(1, labels.view(-1, 1)).squeeze(1)
                alpha = self.alpha.gather(0, labels.view(-1))
                return (-alpha * (1 - logp.exp()) ** self.gamma * logp).mean()

        criterion = FocalLoss([0.25, 0.5, 0.25]).to('cuda')
        logits = torch.randn(6, 3, device='cuda')
        labels = torch.randint(0, 3, (6,), device='cuda')
        """,
        cell="loss = criterion(logits, labels)\n",
        culprit="criterion.alpha",
        checks=("loss",),
    ),
    Case(
        id="per-sample-class-weights-by-indexing",
        url="https://github.com/Hsuxu/Loss_ToolBox-PyTorch/issues/8",
        classes=(1,),
        setup=OPENREG
        + """
        class_weights = torch.tensor([1.0, 4.0, 2.0])   # from the label counts, on the CPU
        logits = torch.randn(6, 3).to(device)
        labels = torch.tensor([0, 1, 2, 1, 0, 2]).to(device)
        """,
        cell="""
        w = class_weights[labels]
        loss = (F.cross_entropy(logits, labels, reduction='none') * w).mean()
        """,
        culprit="class_weights",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
    ),
    Case(
        id="memory-bank-indexed-by-knn-indices",
        url="https://github.com/jayliu0313/Shape-Guided/issues/11",
        classes=(1,),
        setup=OPENREG
        + """
        class MemoryBank:
            def __init__(self, features):
                self.features = features

        bank = MemoryBank(torch.randn(40, 8))   # built on the CPU from the training set
        query = torch.randn(5, 8).to(device)
        scores = torch.randn(5, 40).to(device)
        """,
        cell="""
        knn_idx = scores.topk(3, dim=1).indices
        neighbours = bank.features[knn_idx]
        anomaly = (neighbours - query[:, None]).norm(dim=-1).mean(-1)
        """,
        culprit="bank.features",
        target="openreg:0",
        checks=("anomaly",),
        fake=False,
        standin=True,
    ),
    Case(
        id="index-add-into-an-accumulator-made-without-device",
        url="https://github.com/openforcefield/smee/pull/80",
        classes=(1,),
        setup=OPENREG
        + """
        def aggregate(messages, dst, num_nodes):
            out = torch.zeros(num_nodes, messages.size(1))
            return out.index_add_(0, dst, messages)

        messages = torch.randn(6, 4).to(device)
        dst = torch.tensor([0, 1, 1, 2, 3, 3]).to(device)
        update = nn.Linear(4, 4).to(device)
        """,
        cell="h = update(aggregate(messages, dst, 4))\n",
        culprit="out in aggregate",
        target="openreg:0",
        checks=("h",),
        fake=False,
        standin=True,
    ),
    Case(
        id="index-put-accumulate-into-a-cpu-histogram",
        url="https://github.com/flagos-ai/FlagGems/pull/971",
        classes=(1,),
        setup=OPENREG
        + """
        hist = torch.zeros(8)
        bins = torch.tensor([1, 3, 3, 7, 1, 1]).to(device)
        """,
        cell="""
        hist.index_put_((bins,), torch.ones(bins.shape, device=device), accumulate=True)
        density = hist / hist.sum()
        """,
        culprit="hist",
        target="openreg:0",
        checks=("density",),
        fake=False,
        standin=True,
    ),
    # -- 2. tensors no variable names -----------------------------------------------------
    Case(
        id="rope-table-from-an-lru-cache",
        url="https://github.com/lucidrains/rotary-embedding-torch/pull/48",
        classes=(2,),
        setup="""
        import functools

        @functools.lru_cache(maxsize=None)
        def rope_table(seq_len, dim):
            inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
            angles = torch.outer(torch.arange(seq_len).float(), inv)
            return torch.cat([angles.cos(), angles.sin()], dim=-1)

        def apply_rope(x):
            return x * rope_table(x.shape[-2], x.shape[-1])

        q = torch.randn(2, 4, 8, device='cuda')
        """,
        cell="q_rot = apply_rope(q)\n",
        culprit="rope_table(x.shape[-2], x.shape[-1]) in apply_rope",
        checks=("q_rot",),
    ),
    Case(
        id="causal-mask-from-a-functools-cache",
        url="https://github.com/NVIDIA/TransformerEngine/pull/798",
        classes=(2,),
        setup="""
        import functools

        @functools.cache
        def causal_mask(n):
            return torch.ones(n, n, dtype=torch.bool).triu(1)

        class Attention(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.qkv = nn.Linear(d, 3 * d)

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
                mask = causal_mask(x.shape[1])
                scores = scores.masked_fill(mask, float('-inf'))
                return scores.softmax(-1) @ v

        attn = Attention(8).to('cuda')
        x = torch.randn(2, 5, 8, device='cuda')
        """,
        cell="y = attn(x)\n",
        culprit="mask in Attention.forward",
        checks=("y",),
    ),
    Case(
        id="class-constants-read-through-self",
        url="https://openillumi.com/en/en-pytorch-cuda-tensor-not-transfer-fix",
        classes=(2,),
        setup="""
        class Normalize(nn.Module):
            MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
            STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)

            def forward(self, x):
                return (x - self.MEAN) / self.STD

        norm = Normalize().to('cuda')
        images = torch.rand(2, 3, 4, 4, device='cuda')
        """,
        cell="y = norm(images)\n",
        culprit="Normalize.MEAN",
        checks=("y",),
    ),
    Case(
        id="base-class-constant-read-through-self",
        url="https://github.com/facebookresearch/ReAgent/pull/629",
        classes=(2,),
        setup="""
        class PriorHead(nn.Module):
            PRIOR = torch.tensor([0.2, 0.3, 0.5])

        class Head(PriorHead):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(6, 3)

            def forward(self, x):
                return self.fc(x).softmax(-1) * self.PRIOR

        head = Head().to('cuda')
        feats = torch.randn(4, 6, device='cuda')
        """,
        cell="post = head(feats)\n",
        culprit="PriorHead.PRIOR",
        checks=("post",),
    ),
    Case(
        id="default-argument-normalisation-stats",
        url="https://github.com/rwightman/efficientdet-pytorch/issues/105",
        classes=(2,),
        setup="""
        def normalize(img, mean=torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1),
                      std=torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)):
            return (img - mean) / std

        img = torch.rand(3, 8, 8, device='cuda')
        """,
        cell="x = normalize(img)\n",
        # (named `normalize.__defaults__[0]` until the fifth corpus's authors asked for a
        # default as the function reads it; the fix sets that path)
        culprit="mean in normalize",
        checks=("x",),
    ),
    Case(
        id="torch-func-vmap-over-a-cpu-weight",
        url="https://github.com/pytorch/pytorch/issues/130225",
        classes=(0,),
        setup="""
        from torch.func import vmap
        W = torch.randn(8, 3)

        def score(row):
            return (row @ W).softmax(-1)

        feats = torch.randn(5, 8, device='cuda')
        """,
        cell="probs = vmap(score)(feats)\n",
        culprit="W",
        checks=("probs",),
    ),
    # -- 3. holders without .to() ---------------------------------------------------------
    Case(
        id="vae-prior-distribution-kept-as-attribute",
        url="https://github.com/Lightning-AI/pytorch-lightning/issues/12943",
        classes=(3,),
        setup=OPENREG
        + """
        from torch.distributions import Normal, kl_divergence

        class VAE(nn.Module):
            def __init__(self, d_in=8, d_z=2):
                super().__init__()
                self.enc = nn.Linear(d_in, 2 * d_z)
                self.prior = Normal(torch.zeros(d_z), torch.ones(d_z))

            def forward(self, x):
                mu, logvar = self.enc(x).chunk(2, dim=-1)
                q = Normal(mu, (0.5 * logvar).exp())
                return kl_divergence(q, self.prior).sum(-1)

        vae = VAE().to(device)
        x = torch.randn(4, 8).to(device)
        """,
        cell="kl = vae(x)\n",
        culprit="vae.prior",
        target="openreg:0",
        checks=("kl",),
        fake=False,
        standin=True,
    ),
    Case(
        id="flow-base-distribution-passed-to-the-model",
        url="https://github.com/tonyduan/normalizing-flows/pull/6",
        classes=(3, 4),
        setup=OPENREG
        + """
        from torch.distributions import MultivariateNormal

        class Affine(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.log_scale = nn.Parameter(torch.zeros(d))
                self.shift = nn.Parameter(torch.zeros(d))

            def forward(self, x):
                return x * self.log_scale.exp() + self.shift, self.log_scale.sum().expand(x.shape[0])

        class FlowModel(nn.Module):
            def __init__(self, prior, flows):
                super().__init__()
                self.prior = prior
                self.flows = nn.ModuleList(flows)

            def forward(self, x):
                log_det = torch.zeros(x.shape[0], device=x.device)
                for flow in self.flows:
                    x, ld = flow(x)
                    log_det = log_det + ld
                return x, self.prior.log_prob(x), log_det

        prior = MultivariateNormal(torch.zeros(2), torch.eye(2))
        flow = FlowModel(prior, [Affine(2), Affine(2)]).to(device)
        x = torch.randn(16, 2).to(device)
        """,
        cell="z, prior_logprob, log_det = flow(x)\nnll = -(prior_logprob + log_det).mean()\n",
        culprit="flow.prior",
        target="openreg:0",
        checks=("prior_logprob", "nll"),
        fake=False,
        standin=True,
        xfail="issue 27 mechanism 3: named `prior` (the shortest name the user holds) where the case expects the model's `flow.prior`; the fix (every tensor of the MultivariateNormal, its cached factor too) runs",
    ),
    Case(
        id="config-namespace-holds-the-anchors",
        url="https://github.com/RaoFoundation/bittensor/pull/187",
        classes=(3,),
        setup="""
        from types import SimpleNamespace
        cfg = SimpleNamespace(stride=8, num_classes=2,
                              anchors=torch.tensor([[10., 13.], [16., 30.], [33., 23.]]))

        def decode_wh(pred, cfg):
            return pred[..., 2:4].exp() * cfg.anchors

        head = nn.Conv2d(4, 3 * 4, 1).to('cuda')
        fmap = torch.randn(1, 4, 2, 2, device='cuda')
        """,
        cell="""
        pred = head(fmap).view(1, 3, 4, 2, 2).permute(0, 3, 4, 1, 2)
        wh = decode_wh(pred, cfg)
        """,
        culprit="cfg.anchors",
        checks=("wh",),
    ),
    Case(
        id="pyro-model-samples-its-latent-on-cpu",
        url="https://github.com/pyro-ppl/pyro/issues/2885",
        classes=(3,),
        setup=OPENREG
        + """
        import pyro
        import pyro.distributions as dist

        decoder = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 4)).to(device)

        def model(x):
            pyro.module('decoder', decoder)
            with pyro.plate('data', x.shape[0]):
                z_loc = torch.zeros(x.shape[0], 2)
                z_scale = torch.ones(x.shape[0], 2)
                z = pyro.sample('z', dist.Normal(z_loc, z_scale).to_event(1))
                loc = decoder(z)
                pyro.sample('obs', dist.Normal(loc, 1.0).to_event(1), obs=x)
            return loc

        x = torch.randn(5, 4).to(device)
        """,
        cell="loc = pyro.poutine.trace(model).get_trace(x).nodes['_RETURN']['value']\n",
        culprit="z in model",
        target="openreg:0",
        checks=("loc",),
        fake=False,
        standin=True,
        needs=("pyro",),
    ),
    Case(
        id="gpytorch-kernel-keeps-a-plain-tensor",
        url="https://github.com/geometric-kernels/GeometricKernels/issues/147",
        classes=(3,),
        setup=OPENREG
        + """
        import gpytorch

        class CenteredRBF(gpytorch.kernels.Kernel):
            def __init__(self, center):
                super().__init__()
                self.center = center
                self.base = gpytorch.kernels.RBFKernel()

            def forward(self, x1, x2, diag=False, **params):
                return self.base.forward(x1 - self.center, x2 - self.center, diag=diag, **params)

        class GP(gpytorch.models.ExactGP):
            def __init__(self, x, y, likelihood):
                super().__init__(x, y, likelihood)
                self.mean_module = gpytorch.means.ConstantMean()
                self.covar_module = CenteredRBF(torch.tensor([0.5]))

            def forward(self, x):
                return gpytorch.distributions.MultivariateNormal(
                    self.mean_module(x), self.covar_module(x))

        train_x = torch.linspace(0, 1, 8).unsqueeze(-1).to(device)
        train_y = torch.sin(6 * train_x).squeeze(-1)
        likelihood = gpytorch.likelihoods.GaussianLikelihood().to(device)
        gp = GP(train_x, train_y, likelihood).to(device)
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, gp)
        gp.train()
        likelihood.train()
        """,
        cell="loss = -mll(gp(train_x), train_y)\n",
        culprit="gp.covar_module.center",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
        needs=("gpytorch",),
    ),
    # -- 4. aliases -------------------------------------------------------------------------
    Case(
        id="forward-hook-closes-over-a-global-mask",
        url="https://github.com/mtkresearch/FishLeg/issues/16",
        classes=(4, 2),
        setup="""
        def make_mask_hook(mask):
            def hook(module, inputs, output):
                return output * mask
            return hook

        model = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))
        mask = torch.tensor([1.0, 0.0, 1.0, 1.0])
        model[0].register_forward_hook(make_mask_hook(mask))
        model = model.to('cuda')
        x = torch.randn(3, 6, device='cuda')
        """,
        cell="out = model(x)\n",
        culprit="mask",
        checks=("out",),
    ),
    Case(
        id="default-argument-aliases-a-global-table",
        url="https://github.com/tenstorrent/tt-xla/issues/3335",
        classes=(4, 2),
        setup=OPENREG
        + """
        palette = torch.rand(5, 3)

        def colorize(labels, table=palette):
            return table[labels.argmax(1)].permute(0, 3, 1, 2)

        seg = nn.Conv2d(3, 5, 1).to(device)
        images = torch.rand(1, 3, 4, 4).to(device)
        """,
        cell="overlay = 0.5 * images + 0.5 * colorize(seg(images))\n",
        culprit="palette",
        target="openreg:0",
        checks=("overlay",),
        fake=False,
        standin=True,
    ),
    Case(
        id="helper-object-aliases-a-global-tensor",
        url="https://github.com/StanfordASL/stlcg/pull/5",
        classes=(4,),
        setup="""
        class Featurizer:
            def __init__(self, offsets):
                self.offsets = offsets

            def __call__(self, x):
                return x - self.offsets

        offsets = torch.tensor([0.1, 0.2, 0.3, 0.4])
        featurize = Featurizer(offsets)
        mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)).to('cuda')
        batch = torch.randn(5, 4, device='cuda')
        """,
        cell="pred = mlp(featurize(batch))\n",
        culprit="featurize.offsets",
        checks=("pred",),
    ),
    # -- 5. a path through a module list ---------------------------------------------------
    Case(
        id="layerscale-gamma-in-a-module-list-block",
        url="https://github.com/pytorch/pytorch/issues/17484",
        classes=(5,),
        setup="""
        class Block(nn.Module):
            def __init__(self, d, init=0.1):
                super().__init__()
                self.fc = nn.Linear(d, d)
                self.gamma = init * torch.ones(d)

            def forward(self, x):
                return x + self.gamma * self.fc(x)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([Block(8) for _ in range(2)])

            def forward(self, x):
                for block in self.blocks:
                    x = block(x)
                return x

        net = Net().to('cuda')
        x = torch.randn(4, 8, device='cuda')
        """,
        cell="h = net(x)\n",
        culprit="net.blocks[0].gamma",
        checks=("h",),
    ),
]
