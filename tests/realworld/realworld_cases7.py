"""The seventh corpus, fifth blind batch (issue 27): libraries and code shapes the earlier
corpora do not use, expectations written before ipydevice ran on them, by an author who had
not read the engine, the changelog or the architecture notes.

Libraries new to the corpus: snntorch (``snn.Leaky`` neurons, ``snntorch.functional``
losses), pytorch-crf (``torchcrf.CRF``), nflows (``MaskedAutoregressiveFlow``, a conditional
``Flow``, ``BoxUniform``), perceiver-pytorch (``Perceiver``, ``PerceiverIO``) and
local-attention (``LocalAttention``, ``LocalTransformer``); in ``realworld_cases7b.py``
stable-baselines3 (``PPO`` policies, a custom features extractor), poutyne (``Model``) and
rtdl-revisiting-models (``FTTransformer``, ``MLP``).
Shapes: a membrane potential initialised before the move, a spiking neuron kept in a plain
dict, a CRF layer kept next to the tagger, a CRF mask made from lengths that must stay on the
CPU for ``pack_padded_sequence``, a ``BoxUniform`` prior, a one-hot table read by a helper,
a ``PerceiverIO`` query tensor that was never made a parameter, a padding mask left in a dict
batch and in a namedtuple batch, a generation prompt; in ``realworld_cases7b.py`` actions
rebuilt from numpy, a features extractor's plain constant, a loss function reading class
weights from the notebook, categorical columns forgotten in the loop, quantile boundaries in
a preprocessing object, an ``AveragedModel`` copied before the move, a causal mask kept as a
class attribute, an LSTM cell state in a dataclass, ``EmbeddingBag`` offsets from a CPU
collate, a complex FFT filter kept as a plain attribute, ``index_add_`` segment ids in a
namedtuple graph, a ``Beta`` mixup distribution, parameters captured for
``torch.func.functional_call`` before the move and ``.numpy()`` on a device tensor.

``classes`` names the mechanisms of issue 27 a case exercises (0: none). Cases on
``openreg`` (``standin=True``) are those whose library or fix reads tensor values;
``openreg:0`` stands for the report's GPU. Each case's comment quotes the error the cell
raises, as checked before ipydevice ever ran on it.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

CASES: list[Case] = [
    # -- snntorch -------------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cpu and cuda:0!
    Case(
        id="snntorch-membrane-initialised-before-the-move",
        url="https://github.com/nengo/pytorch-spiking/issues/6",
        classes=(4,),
        setup="""
        import snntorch as snn
        device = 'cuda'
        num_steps = 6
        fc = nn.Linear(12, 16)
        lif = snn.Leaky(beta=0.9)
        readout = nn.Linear(16, 3)
        mem = lif.init_leaky()                 # hoisted out of the time loop
        fc.to(device), lif.to(device), readout.to(device)
        spikes_in = torch.rand(num_steps, 4, 12, device=device)
        """,
        cell="""
        spk_rec = []
        for step in range(num_steps):
            spk, mem = lif(fc(spikes_in[step]), mem)
            spk_rec.append(spk)
        logits = readout(torch.stack(spk_rec).mean(0))
        """,
        culprit="mem",
        checks=("logits", "mem"),
        needs=("snntorch",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="snntorch-rate-loss-targets-left-on-the-cpu",
        url="https://github.com/novioleo/FOTS/issues/14",
        classes=(0,),
        setup="""
        import snntorch as snn
        import snntorch.functional as SF
        device = 'cuda'

        class SNN(nn.Module):
            def __init__(self, steps=5):
                super().__init__()
                self.steps = steps
                self.fc1, self.lif1 = nn.Linear(20, 32), snn.Leaky(beta=0.8)
                self.fc2, self.lif2 = nn.Linear(32, 4), snn.Leaky(beta=0.8)

            def forward(self, x):
                mem1, mem2 = self.lif1.init_leaky(), self.lif2.init_leaky()
                out = []
                for _ in range(self.steps):
                    spk1, mem1 = self.lif1(self.fc1(x), mem1)
                    spk2, mem2 = self.lif2(self.fc2(spk1), mem2)
                    out.append(spk2)
                return torch.stack(out)

        net = SNN().to(device)
        loss_fn = SF.ce_rate_loss()
        train_loader = DataLoader(TensorDataset(torch.rand(8, 20), torch.randint(0, 4, (8,))),
                                  batch_size=4)
        """,
        cell="""
        for data, targets in train_loader:
            data = data.to(device)
            spk_rec = net(data)
            loss = loss_fn(spk_rec, targets)
        """,
        culprit="targets",
        checks=("loss", "spk_rec"),
        needs=("snntorch",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cpu and cuda:0!
    Case(
        id="snntorch-neuron-kept-in-a-plain-dict",
        url="https://github.com/jeshraghian/snntorch/issues/225",
        classes=(5,),
        setup="""
        import snntorch as snn
        device = 'cuda'

        class ConvSNN(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(1, 4, 3, padding=1)
                self.neurons = {'conv': snn.Leaky(beta=0.7, init_hidden=True)}
                self.head = nn.Linear(4 * 8 * 8, 2)

            def forward(self, frame):
                spk = self.neurons['conv'](self.conv(frame))
                return self.head(spk.flatten(1))

        net = ConvSNN().to(device)
        frames = torch.rand(3, 2, 1, 8, 8, device=device)    # time, batch, channel, h, w
        """,
        cell="logits = torch.stack([net(f) for f in frames]).sum(0)\n",
        culprit="net.neurons['conv']",
        checks=("logits",),
        needs=("snntorch",),
    ),
    # -- pytorch-crf ----------------------------------------------------------------------
    # Verified: indices should be either on cpu or on the same device as the indexed tensor
    # (cpu)
    Case(
        id="crf-layer-kept-next-to-the-tagger",
        url="https://github.com/kmkurn/pytorch-crf/issues/67",
        classes=(7,),
        setup=OPENREG
        + """
        from torchcrf import CRF

        class BiRNNTagger(nn.Module):
            def __init__(self, vocab=30, tags=5, d=16):
                super().__init__()
                self.emb = nn.Embedding(vocab, d)
                self.rnn = nn.RNN(d, d, batch_first=True, bidirectional=True)
                self.proj = nn.Linear(2 * d, tags)

            def forward(self, tokens):
                return self.proj(self.rnn(self.emb(tokens))[0])

        tagger = BiRNNTagger().to(device)
        crf = CRF(num_tags=5, batch_first=True)
        tokens = torch.randint(0, 30, (3, 7)).to(device)
        tags = torch.randint(0, 5, (3, 7)).to(device)
        """,
        cell="""
        emissions = tagger(tokens)
        loss = -crf(emissions, tags, reduction='mean')
        """,
        culprit="crf",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
        needs=("torchcrf",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, openreg:0 and cpu!
    Case(
        id="crf-mask-made-from-cpu-lengths",
        url="https://github.com/kmkurn/pytorch-crf/pull/101",
        classes=(2, 6),
        setup=OPENREG
        + """
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
        from torchcrf import CRF

        class Tagger(nn.Module):
            def __init__(self, vocab=30, n_tags=4, d=16):
                super().__init__()
                self.emb = nn.Embedding(vocab, d, padding_idx=0)
                self.rnn = nn.RNN(d, d, batch_first=True, bidirectional=True)
                self.proj = nn.Linear(2 * d, n_tags)
                self.crf = CRF(n_tags, batch_first=True)

            def loss(self, tokens, lengths, tags):
                packed = pack_padded_sequence(self.emb(tokens), lengths, batch_first=True,
                                              enforce_sorted=False)
                out, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=True,
                                             total_length=tokens.shape[1])
                mask = torch.arange(tokens.shape[1])[None, :] < lengths[:, None]
                return -self.crf(self.proj(out), tags, mask=mask, reduction='mean')

        model = Tagger().to(device)
        lengths = torch.tensor([6, 4, 5])        # stays on the CPU for pack_padded_sequence
        tokens = torch.randint(1, 30, (3, 6)).to(device)
        tags = torch.randint(0, 4, (3, 6)).to(device)
        """,
        cell="loss = model.loss(tokens, lengths, tags)\n",
        culprit="mask in Tagger.loss",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
        needs=("torchcrf",),
    ),
    # -- nflows ---------------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, openreg:0 and cpu!
    Case(
        id="nflows-boxuniform-prior-on-the-cpu",
        url="https://github.com/sbi-dev/sbi/issues/853",
        classes=(3,),
        setup=OPENREG
        + """
        from nflows.distributions.uniform import BoxUniform
        from nflows.flows import MaskedAutoregressiveFlow
        prior = BoxUniform(low=-2 * torch.ones(3), high=2 * torch.ones(3))
        proposal = MaskedAutoregressiveFlow(features=3, hidden_features=16, num_layers=2,
                                            num_blocks_per_layer=1).to(device)
        """,
        cell="""
        theta = proposal.sample(64).clamp(-1.9, 1.9)
        log_w = prior.log_prob(theta) - proposal.log_prob(theta)
        """,
        culprit="prior",
        target="openreg:0",
        checks=("log_w",),
        fake=False,
        standin=True,
        needs=("nflows",),
    ),
    # Verified: indices should be either on cpu or on the same device as the indexed tensor
    # (cpu)
    Case(
        id="nflows-one-hot-table-read-by-a-helper",
        url="https://github.com/sbi-dev/sbi/issues/559",
        classes=(1, 2),
        setup=OPENREG
        + """
        from nflows.distributions.normal import StandardNormal
        from nflows.flows.base import Flow
        from nflows.transforms import (CompositeTransform, MaskedAffineAutoregressiveTransform,
                                       ReversePermutation)

        onehot = torch.eye(10)

        def one_hot(labels):
            return onehot[labels]

        transform = CompositeTransform([
            MaskedAffineAutoregressiveTransform(features=2, hidden_features=16, context_features=10),
            ReversePermutation(features=2),
            MaskedAffineAutoregressiveTransform(features=2, hidden_features=16, context_features=10),
        ])
        flow = Flow(transform, StandardNormal([2])).to(device)
        x = torch.randn(32, 2).to(device)
        labels = torch.randint(0, 10, (32,)).to(device)
        """,
        cell="nll = -flow.log_prob(x, context=one_hot(labels)).mean()\n",
        culprit="onehot",
        target="openreg:0",
        checks=("nll",),
        fake=False,
        standin=True,
        needs=("nflows",),
    ),
    # -- perceiver-pytorch ----------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cpu and cuda:0!
    Case(
        id="perceiver-io-queries-never-made-a-parameter",
        url="https://github.com/styalai/xLSTM-pytorch/issues/2",
        classes=(2, 5),
        setup="""
        from perceiver_pytorch import PerceiverIO
        device = 'cuda'

        class SlotDecoder(nn.Module):
            def __init__(self, n_slots=6, qdim=16):
                super().__init__()
                self.io = PerceiverIO(dim=8, queries_dim=qdim, logits_dim=4, depth=1,
                                      num_latents=8, latent_dim=16, cross_heads=1,
                                      latent_heads=2, cross_dim_head=8, latent_dim_head=8)
                self.queries = torch.randn(n_slots, qdim)      # one query per output slot

            def forward(self, x):
                return self.io(x, queries=self.queries)

        model = SlotDecoder().to(device)
        events = torch.randn(2, 20, 8, device=device)
        """,
        cell="slots = model(events)\n",
        culprit="model.queries",
        checks=("slots",),
        needs=("perceiver_pytorch",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="perceiver-padding-mask-left-in-the-batch-dict",
        url="https://github.com/lucidrains/perceiver-pytorch/issues/49",
        classes=(5,),
        setup="""
        from perceiver_pytorch import Perceiver
        device = 'cuda'
        model = Perceiver(input_channels=6, input_axis=1, num_freq_bands=4, max_freq=10.0,
                          depth=1, num_latents=8, latent_dim=16, cross_heads=1, latent_heads=2,
                          cross_dim_head=8, latent_dim_head=8, num_classes=3).to(device)
        lengths = torch.tensor([10, 7])
        batch = {'x': torch.randn(2, 10, 6),
                 'mask': torch.arange(10)[None, :] < lengths[:, None]}
        batch['x'] = batch['x'].to(device)
        """,
        cell="logits = model(batch['x'], mask=batch['mask'])\n",
        culprit="batch['mask']",
        checks=("logits",),
        needs=("perceiver_pytorch",),
    ),
    # -- local-attention ------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="local-attention-mask-in-a-namedtuple-batch",
        url="https://github.com/lucidrains/se3-transformer-pytorch/issues/2",
        classes=(5,),
        setup="""
        from collections import namedtuple
        from local_attention import LocalAttention
        device = 'cuda'
        Batch = namedtuple('Batch', 'x mask')

        class LocalBlock(nn.Module):
            def __init__(self, d=16):
                super().__init__()
                self.to_qkv = nn.Linear(d, 3 * d)
                self.attn = LocalAttention(window_size=4, dim=d, look_forward=1, autopad=True)
                self.out = nn.Linear(d, d)

            def forward(self, x, mask):
                q, k, v = self.to_qkv(x).chunk(3, dim=-1)
                return x + self.out(self.attn(q, k, v, mask=mask))

        block = LocalBlock().to(device)
        batch = Batch(x=torch.randn(2, 12, 16).to(device),
                      mask=torch.tensor([[True] * 12, [True] * 9 + [False] * 3]))
        """,
        cell="h = block(batch.x, batch.mask)\n",
        culprit="batch.mask",
        checks=("h",),
        needs=("local_attention",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="local-transformer-prompt-left-on-the-cpu",
        url="https://github.com/aladdinpersson/Machine-Learning-Collection/issues/9",
        classes=(0,),
        setup="""
        from local_attention import LocalTransformer
        device = 'cuda'
        lm = LocalTransformer(num_tokens=40, max_seq_len=32, dim=16, depth=1, causal=True,
                              local_attn_window_size=8, dim_head=8, heads=2).to(device).eval()
        prime = torch.randint(0, 40, (1, 5))
        """,
        cell="sampled = lm.generate(prime, 6)\n",
        culprit="prime",
        checks=("sampled",),
        needs=("local_attention",),
    ),
    # -- other errors: the panel stays quiet ----------------------------------------------
    # Verified: ValueError: mask of the first timestep must all be on
    Case(
        id="quiet-crf-mask-first-timestep-off",
        url="https://github.com/kmkurn/pytorch-crf/issues/61",
        classes=(0,),
        setup=OPENREG
        + """
        from torchcrf import CRF
        crf = CRF(num_tags=4, batch_first=True).to(device)
        emissions = torch.randn(2, 5, 4).to(device)
        tags = torch.randint(0, 4, (2, 5)).to(device)
        mask = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.bool).to(device)
        """,
        cell="loss = -crf(emissions, tags, mask=mask)\n",
        quiet=True,
        fake=False,
        standin=True,
        needs=("torchcrf",),
    ),
    # Verified: Given normalized_shape=[21], expected input with shape [21], but got input
    # of size torch.Size([2, 24, 26])
    Case(
        id="quiet-perceiver-fed-the-wrong-number-of-channels",
        url="https://github.com/juglab/n2v/issues/37",
        classes=(0,),
        setup="""
        from perceiver_pytorch import Perceiver
        device = 'cuda'
        model = Perceiver(input_channels=3, input_axis=2, num_freq_bands=4, max_freq=10.0,
                          depth=1, num_latents=8, latent_dim=16, cross_heads=1, latent_heads=2,
                          cross_dim_head=8, latent_dim_head=8, num_classes=5).to(device)
        img = torch.randn(2, 3, 8, 8, device=device)     # channels first, as for a CNN
        """,
        cell="logits = model(img)\n",
        quiet=True,
        needs=("perceiver_pytorch",),
    ),
]
