"""The eighth corpus, sixth blind batch (issue 27): libraries and code shapes the earlier
corpora do not use, expectations written before ipydevice ran on them, by an author who had
not read the engine, the changelog or the architecture notes.

Libraries new to the corpus: pytorch-ignite (``EMAHandler``, ``create_supervised_trainer``,
``create_supervised_evaluator`` with a ``Loss`` metric), reformer-pytorch (``ReformerLM``,
``Reformer`` with ``keys``), mixture-of-experts (``MoE``, a custom ``Experts``), siren-pytorch
(``SirenWrapper`` with a latent code, ``SirenNet``), egnn-pytorch (``EGNN``, ``EGNN_Network``
with an adjacency matrix), pytorch-tcn (``TCN`` with conditioning embeddings, streaming
``inference``), asteroid-filterbanks (``Encoder``/``Decoder`` over ``STFTFB``, a ``FreeFB``
subclass) and torchkge (``TransEModel`` with a ``BernoulliNegativeSampler`` and torchkge's own
``DataLoader``, ``DistMultModel.scoring_function``); in ``realworld_cases8b.py`` plain PyTorch.
Shapes: an EMA copy taken before the model moved, a supervised trainer whose model never moved,
a weighted criterion held by an evaluator's metric, a padding mask built from CPU lengths next
to lengths that rightly stay there, a retrieval memory read from the notebook's globals inside
``forward``, MoE experts offloaded by hand, a plain temperature tensor in custom experts, a
latent code made an ``nn.Parameter`` outside any module, a coordinate grid held by a
``functools.partial``, coordinates and an adjacency matrix left behind, a conditioning
embedding in a dict, a streaming chunk moved without reassignment, a decoder left out of a
split encoder/decoder pair, an analysis window kept as a plain attribute of a filterbank,
relation ids forgotten in a knowledge-graph loop and candidate tails built on the CPU.

``classes`` names the mechanisms of issue 27 a case exercises (0: none). Cases on
``openreg`` (``standin=True``) are those whose library or fix reads tensor values (ignite's
engines, MoE gating, torchkge's sampler) or whose operator fake CUDA does not check (a
transposed convolution); ``openreg:0`` stands for the report's GPU. Each case's comment
quotes the error the cell raises, as checked before ipydevice ever ran on it.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

#: A tiny knowledge graph (12 entities, 3 relations) for torchkge.
TINY_KG = """
        from torchkge.data_structures import KnowledgeGraph
        g = torch.Generator().manual_seed(0)
        triples = {'heads': torch.randint(0, 12, (40,), generator=g),
                   'tails': torch.randint(0, 12, (40,), generator=g),
                   'relations': torch.randint(0, 3, (40,), generator=g)}
        kg = KnowledgeGraph(kg=triples, ent2ix={i: i for i in range(12)},
                            rel2ix={i: i for i in range(3)})
"""

CASES: list[Case] = [
    # -- pytorch-ignite -------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, openreg:0 and cpu!
    Case(
        id="ignite-ema-handler-made-before-the-move",
        url="https://github.com/OpenRLHF/OpenRLHF/issues/245",
        classes=(4, 7),
        setup=OPENREG
        + """
        from ignite.engine import Engine
        from ignite.handlers import EMAHandler
        model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
        ema_handler = EMAHandler(model, momentum=0.01)
        model.to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        def train_step(engine, batch):
            x, y = batch[0].to(device), batch[1].to(device)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()

        trainer = Engine(train_step)
        ema_handler.attach(trainer)
        data = [(torch.randn(4, 6), torch.randint(0, 2, (4,))) for _ in range(3)]
        x_val = torch.randn(5, 6).to(device)
        """,
        cell="""
        trainer.run(data, max_epochs=1)
        val_logits = ema_handler.ema_model(x_val)
        """,
        culprit="ema_handler.ema_model",
        target="openreg:0",
        checks=("val_logits",),
        fake=False,
        standin=True,
        needs=("ignite",),
    ),
    # Verified: Expected all tensors to be on the same device, but got mat1 is on openreg:0,
    # different from other tensors on cpu (when checking argument in method
    # wrapper_PrivateUse1_out_addmm)
    Case(
        id="ignite-supervised-trainer-model-never-moved",
        url="https://github.com/pytorch/ignite/issues/192",
        classes=(0,),
        setup=OPENREG
        + """
        from ignite.engine import create_supervised_trainer
        model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        trainer = create_supervised_trainer(model, optimizer, nn.CrossEntropyLoss(), device=device)
        train_loader = DataLoader(TensorDataset(torch.randn(16, 8), torch.randint(0, 3, (16,))),
                                  batch_size=8)
        x_probe = torch.randn(2, 8).to(device)
        """,
        cell="""
        state = trainer.run(train_loader, max_epochs=1)
        probe = model(x_probe)
        """,
        culprit="model",
        target="openreg:0",
        checks=("probe",),
        fake=False,
        standin=True,
        needs=("ignite",),
    ),
    # Verified: Expected all tensors to be on the same device, but got weight is on cpu,
    # different from other tensors on openreg:0 (when checking argument in method
    # wrapper_PrivateUse1_output_nll_loss_forward)
    Case(
        id="ignite-loss-metric-with-a-weighted-criterion",
        url="https://github.com/chemprop/chemprop/pull/1296",
        xfail="issue 27 mechanism 6: the weight the message names is named (`criterion.weight`), not the loss module wholly on the CPU (the fix `criterion.to(device)` runs)",
        classes=(5,),
        setup=OPENREG
        + """
        from ignite.engine import create_supervised_evaluator
        from ignite.metrics import Accuracy, Loss
        class_weights = torch.tensor([0.2, 1.0, 3.0])
        criterion = nn.CrossEntropyLoss(weight=class_weights)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
        evaluator = create_supervised_evaluator(
            model, metrics={'acc': Accuracy(), 'nll': Loss(criterion)}, device=device)
        val_loader = DataLoader(TensorDataset(torch.randn(12, 8), torch.randint(0, 3, (12,))),
                                batch_size=6)
        x_probe = torch.randn(2, 8).to(device)
        """,
        cell="""
        evaluator.run(val_loader)
        metrics = evaluator.state.metrics
        probe_loss = criterion(model(x_probe), torch.tensor([0, 2]).to(device))
        """,
        culprit="criterion",
        target="openreg:0",
        checks=("probe_loss",),
        fake=False,
        standin=True,
        needs=("ignite",),
    ),
    # -- reformer-pytorch -----------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cpu and cuda:0!
    Case(
        id="reformer-input-mask-left-on-the-cpu",
        url="https://github.com/OpenNMT/OpenNMT-py/pull/1494",
        classes=(6,),
        setup="""
        from reformer_pytorch import ReformerLM
        device = 'cuda'
        lm = ReformerLM(num_tokens=50, dim=32, depth=1, max_seq_len=64, heads=2, bucket_size=8,
                        n_hashes=2, causal=True).to(device)
        tokens = torch.randint(0, 50, (2, 32)).to(device)
        lengths = torch.tensor([32, 20])
        input_mask = torch.arange(32)[None, :] < lengths[:, None]
        """,
        cell="""
        logits = lm(tokens, input_mask=input_mask)
        last_logits = logits[torch.arange(2), lengths - 1]     # CPU indices are fine here
        """,
        culprit="input_mask",
        checks=("logits", "last_logits"),
        needs=("reformer_pytorch",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="reformer-memory-keys-read-from-a-global",
        url="https://github.com/Tencent/NeuralNLP-NeuralClassifier/issues/123",
        classes=(2,),
        setup="""
        from reformer_pytorch import Reformer
        device = 'cuda'
        memory = torch.randn(1, 16, 32)            # retrieved passages, encoded once

        class ReadOut(nn.Module):
            def __init__(self):
                super().__init__()
                self.reformer = Reformer(dim=32, depth=1, heads=2, bucket_size=8, n_hashes=2)
                self.head = nn.Linear(32, 4)

            def forward(self, x):
                keys = memory.expand(x.shape[0], -1, -1)
                return self.head(self.reformer(x, keys=keys).mean(1))

        reader = ReadOut().to(device)
        x = torch.randn(2, 16, 32, device=device)
        """,
        cell="scores = reader(x)\n",
        culprit="memory",
        checks=("scores",),
        needs=("reformer_pytorch",),
    ),
    # -- mixture-of-experts ---------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but got mat2 is on cpu,
    # different from other tensors on openreg:0 (when checking argument in method
    # wrapper_PrivateUse1_out_bmm)
    Case(
        id="moe-experts-offloaded-to-the-cpu",
        url="https://github.com/lucidrains/mixture-of-experts/issues/5",
        xfail="issue 27 mechanism 7: experts moved to the CPU by hand are taken as placed on purpose: `x` named, target cpu, where the author wants `block.moe.experts` back on the device",
        classes=(7,),
        setup=OPENREG
        + """
        from mixture_of_experts import MoE

        class MoEBlock(nn.Module):
            def __init__(self, d=16):
                super().__init__()
                self.norm = nn.LayerNorm(d)
                self.moe = MoE(dim=d, num_experts=4, hidden_dim=32,
                               second_policy_train='all', second_policy_eval='all')

            def forward(self, x):
                out, aux_loss = self.moe(self.norm(x))
                return x + out, aux_loss

        block = MoEBlock().to(device)
        block.moe.experts.to('cpu')     # the expert weights are the big part: keep them off the GPU
        x = torch.randn(2, 8, 16, device=device)
        """,
        cell="y, aux_loss = block(x)\n",
        culprit="block.moe.experts",
        target="openreg:0",
        checks=("y", "aux_loss"),
        fake=False,
        standin=True,
        needs=("mixture_of_experts",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, openreg:0 and cpu!
    Case(
        id="moe-custom-experts-with-a-plain-temperature",
        url="https://github.com/kijai/ComfyUI-WanVideoWrapper/pull/1696",
        classes=(5,),
        setup=OPENREG
        + """
        from mixture_of_experts import MoE, Experts

        class TemperedExperts(Experts):
            def __init__(self, dim, num_experts):
                super().__init__(dim, num_experts=num_experts, hidden_dim=2 * dim)
                self.temperature = torch.linspace(0.5, 2.0, num_experts)[:, None, None]

            def forward(self, x):
                return super().forward(x) / self.temperature

        moe = MoE(dim=16, num_experts=4, experts=TemperedExperts(16, 4),
                  second_policy_train='all', second_policy_eval='all').to(device)
        tokens = torch.randn(3, 6, 16, device=device)
        """,
        cell="out, aux = moe(tokens)\n",
        culprit="moe.experts.temperature",
        target="openreg:0",
        checks=("out",),
        fake=False,
        standin=True,
        needs=("mixture_of_experts",),
    ),
    # -- siren-pytorch --------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cpu and cuda:0!
    Case(
        id="siren-latent-code-made-a-parameter-on-the-cpu",
        url="https://github.com/graviraja/pytorch-sample-codes/issues/1",
        classes=(0,),
        setup="""
        from siren_pytorch import SirenNet, SirenWrapper
        device = 'cuda'
        net = SirenNet(dim_in=2, dim_hidden=32, dim_out=3, num_layers=2)
        wrapper = SirenWrapper(net, image_width=8, image_height=8, latent_dim=16).to(device)
        latent = nn.Parameter(1e-2 * torch.randn(16))    # auto-decoder code
        img = torch.rand(1, 3, 8, 8, device=device)
        """,
        cell="loss = wrapper(img, latent=latent)\n",
        culprit="latent",
        checks=("loss",),
        needs=("siren_pytorch",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cpu and cuda:0!
    Case(
        id="siren-render-partial-holding-a-cpu-grid",
        url="https://github.com/pytorch/pytorch/issues/48650",
        classes=(2, 5),
        setup="""
        from functools import partial
        from siren_pytorch import SirenNet
        device = 'cuda'

        def render(net, coords, size):
            return net(coords).reshape(size, size, -1)

        side = torch.linspace(-1, 1, 16)
        render_16 = partial(render, coords=torch.cartesian_prod(side, side), size=16)
        net = SirenNet(dim_in=2, dim_hidden=32, dim_out=1, num_layers=3).to(device)
        """,
        cell="image = render_16(net)\n",
        culprit="render_16.keywords['coords']",
        checks=("image",),
        needs=("siren_pytorch",),
    ),
    # -- egnn-pytorch ---------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="egnn-coordinates-left-on-the-cpu",
        url="https://github.com/KatieBuc/gnnad/issues/6",
        classes=(0,),
        setup="""
        from egnn_pytorch import EGNN
        device = 'cuda'
        layer = EGNN(dim=8, m_dim=16).to(device)
        feats = torch.randn(2, 10, 8).to(device)
        coors = torch.randn(2, 10, 3)
        """,
        cell="feats_out, coors_out = layer(feats, coors)\n",
        culprit="coors",
        checks=("feats_out", "coors_out"),
        needs=("egnn_pytorch",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="egnn-network-adjacency-left-on-the-cpu",
        url="https://github.com/ycq091044/LEGCN/issues/1",
        classes=(1,),
        setup="""
        from egnn_pytorch import EGNN_Network
        device = 'cuda'
        net = EGNN_Network(num_tokens=10, dim=8, depth=1, num_adj_degrees=2, adj_dim=4,
                           m_dim=8).to(device)
        atoms = torch.randint(0, 10, (1, 12)).to(device)
        coors = torch.randn(1, 12, 3).to(device)
        bonds = torch.rand(12, 12) > 0.7
        adj_mat = bonds | bonds.T
        """,
        cell="feats_out, coors_out = net(atoms, coors, adj_mat=adj_mat)\n",
        culprit="adj_mat",
        checks=("feats_out",),
        needs=("egnn_pytorch",),
    ),
    # -- pytorch-tcn ----------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="tcn-speaker-embedding-left-in-a-dict",
        url="https://github.com/timothybrooks/instruct-pix2pix/issues/96",
        classes=(5,),
        setup="""
        from pytorch_tcn import TCN
        device = 'cuda'
        tcn = TCN(num_inputs=4, num_channels=[8, 8], kernel_size=3, causal=True,
                  embedding_shapes=[(6,)], embedding_mode='add').to(device)
        cond = {'speaker': torch.randn(2, 6), 'lang': torch.tensor([0, 1])}
        audio_feats = torch.randn(2, 4, 20, device=device)
        """,
        cell="out = tcn(audio_feats, embeddings=[cond['speaker']])\n",
        culprit="cond['speaker']",
        checks=("out",),
        needs=("pytorch_tcn",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="tcn-streaming-chunk-not-reassigned",
        url="https://github.com/hunkim/PyTorchZeroToAll/pull/6",
        classes=(8,),
        setup="""
        from pytorch_tcn import TCN
        device = 'cuda'
        tcn = TCN(num_inputs=2, num_channels=[8, 8], kernel_size=3, causal=True).to(device).eval()
        stream = torch.randn(1, 2, 40)
        """,
        cell="""
        outs = []
        for chunk in stream.split(10, dim=-1):
            chunk.to(device)
            outs.append(tcn.inference(chunk))
        y = torch.cat(outs, dim=-1)
        """,
        culprit="chunk",
        checks=("y",),
        needs=("pytorch_tcn",),
    ),
    # -- asteroid-filterbanks -------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but got weight is on cpu,
    # different from other tensors on openreg:0 (when checking argument in method
    # wrapper_PrivateUse1__convolution)
    Case(
        id="asteroid-decoder-left-on-the-cpu",
        url="https://github.com/IliaZenkov/transformer-cnn-emotion-recognition/issues/6",
        classes=(7,),
        setup=OPENREG
        + """
        from asteroid_filterbanks import Encoder, Decoder, STFTFB
        encoder = Encoder(STFTFB(n_filters=64, kernel_size=64, stride=16)).to(device)
        decoder = Decoder(STFTFB(n_filters=64, kernel_size=64, stride=16))
        masker = nn.Sequential(nn.Conv1d(66, 66, 1), nn.Sigmoid()).to(device)
        mixture = torch.randn(2, 1, 1600, device=device)
        """,
        cell="""
        tf_rep = encoder(mixture)
        estimate = decoder(tf_rep * masker(tf_rep))
        """,
        culprit="decoder",
        target="openreg:0",
        checks=("estimate",),
        fake=False,
        standin=True,
        needs=("asteroid_filterbanks",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="asteroid-free-filterbank-window-plain-attribute",
        url="https://github.com/pytorch/pytorch/issues/2641",
        classes=(2, 5),
        setup="""
        from asteroid_filterbanks import Encoder, FreeFB
        device = 'cuda'

        class WindowedFB(FreeFB):
            def __init__(self, n_filters, kernel_size, stride):
                super().__init__(n_filters, kernel_size, stride)
                self.window = torch.hann_window(kernel_size)

            def filters(self):
                return self._filters * self.window

        encoder = Encoder(WindowedFB(n_filters=32, kernel_size=32, stride=8)).to(device)
        wav = torch.randn(2, 1, 800, device=device)
        """,
        cell="spec = encoder(wav)\n",
        culprit="encoder.filterbank.window",
        checks=("spec",),
        needs=("asteroid_filterbanks",),
    ),
    # -- torchkge -------------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but got index is on cpu,
    # different from other tensors on openreg:0 (when checking argument in method
    # wrapper_PrivateUse1__index_select)
    Case(
        id="torchkge-relations-forgotten-in-the-loop",
        url="https://github.com/torchkge-team/torchkge/issues/251",
        classes=(1,),
        setup=OPENREG
        + TINY_KG
        + """
        from torchkge.models import TransEModel
        from torchkge.sampling import BernoulliNegativeSampler
        from torchkge.utils import MarginLoss, DataLoader as KGDataLoader
        model = TransEModel(emb_dim=16, n_entities=kg.n_ent, n_relations=kg.n_rel).to(device)
        sampler = BernoulliNegativeSampler(kg)
        criterion = MarginLoss(margin=0.5)
        loader = KGDataLoader(kg, batch_size=20)
        """,
        cell="""
        for h, t, r in loader:
            h, t = h.to(device), t.to(device)
            n_h, n_t = sampler.corrupt_batch(h, t, r)
            pos, neg = model(h, t, r, n_h, n_t)
            loss = criterion(pos, neg)
        """,
        culprit="r",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
        needs=("torchkge",),
    ),
    # Verified: Expected all tensors to be on the same device, but got index is on cpu,
    # different from other tensors on openreg:0 (when checking argument in method
    # wrapper_PrivateUse1__index_select)
    Case(
        id="torchkge-candidate-tails-built-on-the-cpu",
        url="https://github.com/torchkge-team/torchkge/pull/18",
        classes=(1,),
        setup=OPENREG
        + TINY_KG
        + """
        from torchkge.models import DistMultModel
        model = DistMultModel(emb_dim=16, n_entities=kg.n_ent, n_relations=kg.n_rel).to(device)
        query_h = torch.tensor([3, 5]).to(device)
        query_r = torch.tensor([1, 0]).to(device)
        """,
        cell="""
        candidates = torch.arange(kg.n_ent)
        scores = model.scoring_function(query_h.repeat_interleave(kg.n_ent),
                                        candidates.repeat(2),
                                        query_r.repeat_interleave(kg.n_ent)).view(2, -1)
        """,
        culprit="candidates",
        target="openreg:0",
        checks=("scores",),
        fake=False,
        standin=True,
        needs=("torchkge",),
    ),
]
