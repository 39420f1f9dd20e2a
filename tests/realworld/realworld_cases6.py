"""The sixth corpus, fourth blind batch (issue 27): libraries and code shapes the earlier
corpora do not use, expectations written before ipydevice ran on them, by an author who had
not read the engine, the changelog or the architecture notes.

Libraries new to the corpus: pytorch-tabnet (``TabNet``, ``TabNetNoEmbeddings``), e3nn
(``o3.Linear``, ``o3.spherical_harmonics``, ``o3.FullyConnectedTensorProduct``), tensordict
(``TensorDict``, ``TensorDictModule``), OmegaConf (``DictConfig`` configs), geoopt
(``PoincareBall``, ``ManifoldParameter``), linear-attention-transformer
(``LinearAttentionTransformer``, ``LinearAttentionTransformerLM``) and lion-pytorch (``Lion``).
Shapes: a confusion matrix accumulated over an evaluation loop, an element table indexed by
device atomic numbers, ``bucketize`` boundaries made in a helper, a class attribute of a
custom ``autograd.Function`` read by a ``nn.Linear`` subclass in a training step with a
scheduler, a ``Parameter`` scaled at init (a plain tensor), a tensor made from a config inside
a method, the legacy ``torch.FloatTensor`` constructor, a cache filled by a dry run before
the move, a forward pre-hook's noise, a plain wrapper object, a config holding a tensor, a
``MixtureSameFamily`` prior, a checkpoint's nested dict loaded with ``map_location``; in
``realworld_cases6b.py`` a buffer, a ``TensorDict`` leaf and unpacked statistics kept from
before a move, a list of gradient accumulators, containers grown after the move, inputs from
a CPU collate, a model never moved, a simulator and an embedding table kept on the CPU, and
``.to()`` dropped on a ``TensorDict``, in a training-step helper, in a holder's own ``to()``
and in a generator of batches.

This file: lookups and index operators (mechanism 1 of issue 27), tensors no variable names
(2), holders without ``.to()`` (3) and the other errors the panel must leave alone;
``realworld_cases6b.py`` has the rest. ``classes`` names the mechanisms a case
exercises (0: none). Cases on ``openreg`` (``standin=True``) are those whose library or fix
reads tensor values; ``openreg:0`` stands for the report's GPU.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

#: tensordict's ``.to()`` waits on the device module's ``synchronize()``; the stand-in has
#: no streams to wait for.
TENSORDICT = (
    OPENREG
    + """
        torch.openreg.synchronize = lambda device=None: None
"""
)

CASES: list[Case] = [
    # -- 1. lookups and index operators ---------------------------------------------------
    Case(
        id="confusion-matrix-accumulated-on-the-cpu",
        url="https://github.com/sraashis/easytorch/pull/257",
        classes=(1,),
        setup=OPENREG
        + """
        model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)).to(device).eval()
        val_loader = DataLoader(TensorDataset(torch.randn(10, 6), torch.randint(0, 3, (10,))),
                                batch_size=4)
        conf = torch.zeros(3, 3, dtype=torch.long)     # rows: true class, columns: predicted
        """,
        cell="""
        with torch.no_grad():
            for xb, yb in val_loader:
                xb, yb = xb.to(device), yb.to(device)
                preds = model(xb).argmax(1)
                conf[yb, preds] += 1
        accuracy = conf.diag().sum() / conf.sum()
        """,
        culprit="conf",
        target="openreg:0",
        checks=("conf", "accuracy"),
        fake=False,
        standin=True,
    ),
    Case(
        id="covalent-radii-indexed-by-device-atomic-numbers",
        url="https://github.com/Harry24k/CW-pytorch/issues/3",
        classes=(1,),
        setup=OPENREG
        + """
        from e3nn import o3
        # covalent radii (angstrom) by atomic number: H, He, Li, Be, B, C, N, O
        covalent_radii = torch.tensor([0.0, 0.31, 0.28, 1.28, 0.96, 0.84, 0.76, 0.71, 0.66])
        irreps_sh = o3.Irreps.spherical_harmonics(2)
        z = torch.tensor([6, 1, 1, 8, 7, 1]).to(device)
        pos = (torch.randn(6, 3) * 0.8).to(device)
        src, dst = torch.triu_indices(6, 6, offset=1).to(device)
        """,
        cell="""
        vec = pos[dst] - pos[src]
        cutoff = covalent_radii[z[src]] + covalent_radii[z[dst]] + 0.4
        bonded = vec.norm(dim=-1) < cutoff
        sh = o3.spherical_harmonics(irreps_sh, vec, normalize=True) * bonded[:, None]
        """,
        culprit="covalent_radii",
        target="openreg:0",
        checks=("cutoff", "sh"),
        fake=False,
        standin=True,
        needs=("e3nn",),
    ),
    Case(
        id="tabnet-age-bins-bucketized-in-a-helper",
        url="https://github.com/huggingface/transformers/issues/39947",
        classes=(1, 2),
        setup=OPENREG
        + """
        from pytorch_tabnet.tab_network import TabNet
        from pytorch_tabnet.utils import create_group_matrix

        def age_bins(age, n_bins=4):
            boundaries = torch.linspace(18, 80, n_bins + 1)[1:-1]
            return torch.bucketize(age, boundaries)

        groups = create_group_matrix([], 4).to(device)
        model = TabNet(input_dim=4, output_dim=2, n_d=4, n_a=4, n_steps=2, cat_idxs=[0],
                       cat_dims=[4], cat_emb_dim=[2], group_attention_matrix=groups).to(device)
        age = torch.tensor([23.0, 41.0, 67.0, 35.0, 58.0, 19.0]).to(device)
        income = torch.randn(6, 3).to(device)
        """,
        cell="""
        x = torch.cat([age_bins(age)[:, None].float(), income], dim=1)
        logits, sparsity_loss = model(x)
        """,
        culprit="boundaries in age_bins",
        target="openreg:0",
        checks=("logits",),
        fake=False,
        standin=True,
        needs=("pytorch_tabnet",),
    ),
    # -- 2. tensors no variable names -----------------------------------------------------
    Case(
        id="tabnet-noembeddings-identity-group-matrix",
        url="https://github.com/dreamquark-ai/tabnet/issues/578",
        classes=(2,),
        setup=OPENREG
        + """
        from pytorch_tabnet.tab_network import TabNetNoEmbeddings
        model = TabNetNoEmbeddings(input_dim=5, output_dim=2, n_d=4, n_a=4, n_steps=2).to(device)
        x = torch.randn(6, 5).to(device)
        """,
        cell="logits, sparsity_loss = model(x)\n",
        culprit="model.encoder.group_attention_matrix",
        target="openreg:0",
        checks=("logits",),
        fake=False,
        standin=True,
        needs=("pytorch_tabnet",),
    ),
    Case(
        id="quantizer-levels-on-an-autograd-function",
        url="https://github.com/microsoft/nni/issues/2918",
        classes=(2,),
        setup=OPENREG
        + """
        class RoundToLevels(torch.autograd.Function):
            levels = torch.linspace(-1, 1, 9)          # the 3-bit codebook, made once

            @staticmethod
            def forward(ctx, w):
                idx = (w.unsqueeze(-1) - RoundToLevels.levels).abs().argmin(-1)
                return RoundToLevels.levels[idx]

            @staticmethod
            def backward(ctx, grad):
                return grad                            # straight-through

        class QuantLinear(nn.Linear):
            def forward(self, x):
                return F.linear(x, RoundToLevels.apply(self.weight.tanh()), self.bias)

        net = nn.Sequential(QuantLinear(6, 8), nn.ReLU(), QuantLinear(8, 3)).to(device)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
        x = torch.randn(5, 6).to(device)
        y = torch.randint(0, 3, (5,)).to(device)
        """,
        cell="""
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        sched.step()
        """,
        culprit="RoundToLevels.levels",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
    ),
    Case(
        id="positional-parameter-scaled-at-init",
        url="https://github.com/Fraunhofer-IIS/prosper_nn/issues/13",
        classes=(2,),
        setup=OPENREG
        + """
        from linear_attention_transformer import LinearAttentionTransformer

        class SeqEncoder(nn.Module):
            def __init__(self, d=16, max_len=12):
                super().__init__()
                self.proj = nn.Linear(3, d)
                self.pos = nn.Parameter(torch.randn(1, max_len, d)) * 0.02
                self.body = LinearAttentionTransformer(dim=d, heads=2, depth=1, max_seq_len=max_len)

            def forward(self, x):
                return self.body(self.proj(x) + self.pos[:, : x.shape[1]])

        enc = SeqEncoder().to(device)
        readings = torch.randn(2, 10, 3).to(device)
        """,
        cell="h = enc(readings)\n",
        culprit="enc.pos",
        target="openreg:0",
        checks=("h",),
        fake=False,
        standin=True,
        needs=("linear_attention_transformer",),
    ),
    Case(
        id="omegaconf-pos-weight-made-in-the-training-step",
        url="https://github.com/catalyst-team/catalyst/issues/1068",
        classes=(2,),
        setup=OPENREG
        + """
        from omegaconf import OmegaConf
        cfg = OmegaConf.create({'model': {'hidden': 16, 'labels': 3},
                                'loss': {'pos_weight': [3.0, 1.5, 8.0]}})

        class Tagger(nn.Module):
            def __init__(self, cfg):
                super().__init__()
                self.cfg = cfg
                self.net = nn.Sequential(nn.Linear(10, cfg.model.hidden), nn.ReLU(),
                                         nn.Linear(cfg.model.hidden, cfg.model.labels))

            def training_step(self, batch):
                x, y = batch
                pos_weight = torch.tensor(self.cfg.loss.pos_weight)
                return F.binary_cross_entropy_with_logits(self.net(x), y, pos_weight=pos_weight)

        tagger = Tagger(cfg).to(device)
        batch = (torch.randn(4, 10).to(device), torch.randint(0, 2, (4, 3)).float().to(device))
        """,
        cell="loss = tagger.training_step(batch)\n",
        culprit="pos_weight in Tagger.training_step",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
        needs=("omegaconf",),
    ),
    Case(
        id="rpo-noise-from-the-legacy-constructor",
        url="https://github.com/vwxyzjn/cleanrl/pull/396",
        classes=(2,),
        setup=OPENREG
        + """
        from torch.distributions import Normal

        class Agent(nn.Module):
            def __init__(self, obs_dim=4, act_dim=2, rpo_alpha=0.5):
                super().__init__()
                self.critic = nn.Sequential(nn.Linear(obs_dim, 16), nn.Tanh(), nn.Linear(16, 1))
                self.actor_mean = nn.Sequential(nn.Linear(obs_dim, 16), nn.Tanh(), nn.Linear(16, act_dim))
                self.actor_logstd = nn.Parameter(torch.zeros(1, act_dim))
                self.rpo_alpha = rpo_alpha

            def get_action_and_value(self, obs, action=None):
                mean = self.actor_mean(obs)
                std = self.actor_logstd.expand_as(mean).exp()
                if action is None:
                    action = Normal(mean, std).sample()
                else:                                  # robust policy optimization
                    z = torch.FloatTensor(mean.shape).uniform_(-self.rpo_alpha, self.rpo_alpha)
                    mean = mean + z
                probs = Normal(mean, std)
                return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(obs)

        agent = Agent().to(device)
        b_obs = torch.randn(8, 4).to(device)
        b_actions = torch.randn(8, 2).to(device)
        b_logprobs = torch.randn(8).to(device)
        """,
        cell="""
        _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs, b_actions)
        ratio = (newlogprob - b_logprobs).exp()
        """,
        culprit="z in Agent.get_action_and_value",
        target="openreg:0",
        checks=("ratio", "entropy"),
        fake=False,
        standin=True,
    ),
    Case(
        id="relative-index-cached-by-a-dry-run",
        url="https://github.com/ldeecke/gmm-torch/issues/37",
        classes=(2,),
        setup=OPENREG
        + """
        from linear_attention_transformer import LinearAttentionTransformer

        class Forecaster(nn.Module):
            def __init__(self, d=16, horizon=3):
                super().__init__()
                self.inp = nn.Linear(1, d)
                self.body = LinearAttentionTransformer(dim=d, heads=2, depth=1, max_seq_len=32)
                self.head = nn.Linear(d, horizon)
                self.batch_size_last = None
                self.relative_index = None

            def forward(self, y):
                b, t, _ = y.shape
                if b != self.batch_size_last:          # rebuilt only when the batch size changes
                    self.relative_index = torch.linspace(-1, 0, t).expand(b, t).unsqueeze(-1)
                    self.batch_size_last = b
                return self.head(self.body(self.inp(y) + self.relative_index)[:, -1])

        model = Forecaster()
        model(torch.randn(4, 12, 1))                    # a dry run on the CPU
        model.to(device)
        series = torch.randn(4, 12, 1).to(device)
        """,
        cell="forecast = model(series)\n",
        culprit="model.relative_index",
        target="openreg:0",
        checks=("forecast",),
        fake=False,
        standin=True,
        needs=("linear_attention_transformer",),
    ),
    Case(
        id="input-noise-drawn-in-a-forward-pre-hook",
        url="https://github.com/ARISE-Initiative/robomimic/pull/124",
        classes=(2,),
        setup="""
        device = 'cuda'

        def gaussian_input_noise(sigma):
            def hook(module, args):
                (x,) = args
                noise = sigma * torch.randn(x.shape)
                return (x + noise,)
            return hook

        obs_encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(device)
        obs_encoder.register_forward_pre_hook(gaussian_input_noise(0.1))
        obs = torch.randn(5, 8, device=device)
        """,
        cell="z = obs_encoder(obs)\n",
        culprit="noise in hook",
        checks=("z",),
    ),
    # -- 3. holders without .to() ---------------------------------------------------------
    Case(
        id="action-bounds-on-a-plain-wrapper",
        url="https://github.com/Intelligent-Driving-Laboratory/GOPS/issues/15",
        classes=(3,),
        setup=OPENREG
        + """
        class ScaleAction:
            def __init__(self, low, high):
                self.low, self.high = low, high

            def __call__(self, action):
                return torch.clip(action, self.low, self.high)

        actor = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 2)).to(device)
        clip_action = ScaleAction(torch.tensor([-1.0, -0.5]), torch.tensor([1.0, 0.5]))
        obs = torch.randn(8, 6).to(device)
        """,
        cell="action = clip_action(actor(obs))\n",
        culprit="clip_action.low",
        target="openreg:0",
        checks=("action",),
        fake=False,
        standin=True,
    ),
    Case(
        id="omegaconf-config-holds-the-class-weights",
        url="https://github.com/torchgeo/torchgeo/issues/2060",
        classes=(3,),
        setup=OPENREG
        + """
        from omegaconf import OmegaConf
        cfg = OmegaConf.create({'model': {'classes': 4}, 'loss': {'ignore_index': 0}},
                               flags={'allow_objects': True})
        cfg.loss.class_weights = torch.tensor([0.0, 1.0, 2.5, 4.0])   # from the label counts
        seg_head = nn.Conv2d(8, cfg.model.classes, 1).to(device)
        feats = torch.randn(2, 8, 6, 6).to(device)
        mask = torch.randint(0, 4, (2, 6, 6)).to(device)
        """,
        cell="""
        loss = F.cross_entropy(seg_head(feats), mask, weight=cfg.loss.class_weights,
                               ignore_index=cfg.loss.ignore_index)
        """,
        culprit="cfg.loss.class_weights",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
        needs=("omegaconf",),
    ),
    Case(
        id="mixture-prior-of-a-vae-left-on-the-cpu",
        url="https://github.com/YosefLab/velovi/issues/9",
        classes=(3,),
        setup=OPENREG
        + """
        from torch.distributions import Categorical, Independent, MixtureSameFamily, Normal
        K, D = 4, 2
        prior = MixtureSameFamily(Categorical(logits=torch.zeros(K)),
                                  Independent(Normal(torch.randn(K, D) * 2, torch.ones(K, D)), 1))
        encoder = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2 * D)).to(device)
        x = torch.randn(5, 6).to(device)
        """,
        cell="""
        mu, log_sigma = encoder(x).chunk(2, -1)
        z = mu + log_sigma.exp() * torch.randn_like(mu)
        log_pz = prior.log_prob(z)
        """,
        culprit="prior",
        target="openreg:0",
        checks=("log_pz",),
        fake=False,
        standin=True,
    ),
    Case(
        id="calibration-temperature-from-a-cpu-checkpoint",
        url="https://github.com/gpleiss/temperature_scaling/issues/24",
        classes=(3,),
        setup=OPENREG
        + """
        import io
        net = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 5))
        buf = io.BytesIO()
        torch.save({'model': net.state_dict(), 'calibration': {'temperature': torch.tensor([1.7])}}, buf)
        buf.seek(0)
        ckpt = torch.load(buf, map_location='cpu')
        net.load_state_dict(ckpt['model'])
        net.to(device).eval()
        x_test = torch.randn(6, 10).to(device)
        """,
        cell="""
        with torch.no_grad():
            probs = (net(x_test) / ckpt['calibration']['temperature']).softmax(-1)
        """,
        culprit="ckpt['calibration']['temperature']",
        target="openreg:0",
        checks=("probs",),
        fake=False,
        standin=True,
    ),
    # -- other errors: the panel stays quiet ------------------------------------------------
    Case(
        id="quiet-e3nn-features-with-the-wrong-irreps",
        url="https://github.com/ACEsuit/mace/issues/63",
        classes=(0,),
        setup=OPENREG
        + """
        from e3nn import o3
        lin = o3.Linear('8x0e + 4x1o', '4x0e + 2x1o').to(device)
        node_feats = torch.randn(5, 8 + 4).to(device)    # 4x1o needs 12 numbers, not 4
        """,
        cell="out = lin(node_feats)\n",
        quiet=True,
        fake=False,
        standin=True,
        needs=("e3nn",),
    ),
    Case(
        id="quiet-tensordict-batch-size-of-the-wrong-length",
        url="https://github.com/pytorch/rl/issues/1766",
        classes=(0,),
        setup=TENSORDICT
        + """
        from tensordict import TensorDict
        obs = torch.randn(16, 4).to(device)
        reward = torch.randn(15, 1).to(device)      # the last step was dropped
        """,
        cell="td = TensorDict({'observation': obs, 'reward': reward}, batch_size=[16])\n",
        quiet=True,
        fake=False,
        standin=True,
        needs=("tensordict",),
    ),
    Case(
        id="quiet-omegaconf-refuses-a-tensor",
        url="https://github.com/omry/omegaconf/issues/344",
        classes=(0,),
        setup=OPENREG
        + """
        from omegaconf import OmegaConf
        class_weights = torch.tensor([0.2, 1.0, 3.0]).to(device)
        """,
        cell="cfg = OmegaConf.create({'loss': {'class_weights': class_weights}})\n",
        quiet=True,
        fake=False,
        standin=True,
        needs=("omegaconf",),
    ),
    Case(
        id="quiet-tabnet-fed-one-column-too-many",
        url="https://github.com/dreamquark-ai/tabnet/issues/276",
        classes=(0,),
        setup=OPENREG
        + """
        from pytorch_tabnet.tab_network import TabNetNoEmbeddings
        model = TabNetNoEmbeddings(input_dim=5, output_dim=2, n_d=4, n_a=4, n_steps=2,
                                   group_attention_matrix=torch.eye(5).to(device)).to(device)
        x_test = torch.randn(6, 6).to(device)         # the preprocessing added a column
        """,
        cell="logits, _ = model(x_test)\n",
        quiet=True,
        fake=False,
        standin=True,
        needs=("pytorch_tabnet",),
    ),
]
